"""Server-rendered SVG charts: no JavaScript library and no CDN, readable without scripts."""

from __future__ import annotations

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobweaver.dashboard.selectors import MinuteBucket

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 640, 160, 36, 18, 8


def throughput_svg(
    buckets: list[MinuteBucket], *, completed_url: str, failed_url: str
) -> SafeString:
    """Attempts finished per minute as stacked bars (succeeded, failed) with the failure rate
    as a line on a 0-100 % scale; each bar's tooltip gives its numbers."""
    plot_w, plot_h = WIDTH - LEFT - 4, HEIGHT - BOTTOM - TOP
    peak = max((b.finished for b in buckets), default=0) or 1
    bar_w = plot_w / max(len(buckets), 1)
    bars, points = [], []
    for index, bucket in enumerate(buckets):
        x = LEFT + index * bar_w
        ok_h = plot_h * bucket.succeeded / peak
        failed_h = plot_h * bucket.failed / peak
        rate = bucket.failed / bucket.finished if bucket.finished else 0.0
        tip = (
            f"{bucket.start:%H:%M} UTC: {bucket.succeeded} succeeded, {bucket.failed} failed"
            f" ({rate:.0%} failure rate)"
        )
        bars.append(
            (
                f"{x:.1f}",
                f"{TOP + plot_h - ok_h:.1f}",
                f"{max(bar_w - 1, 1):.1f}",
                f"{ok_h:.1f}",
                f"{TOP + plot_h - ok_h - failed_h:.1f}",
                f"{failed_h:.1f}",
                tip,
            )
        )
        if bucket.finished:
            points.append(f"{x + bar_w / 2:.1f},{TOP + plot_h * (1 - rate):.1f}")
    bar_markup = format_html_join(
        "",
        '<g><title>{6}</title><rect class="jw-ok" x="{0}" y="{1}" width="{2}" height="{3}"/>'
        '<rect class="jw-failed" x="{0}" y="{4}" width="{2}" height="{5}"/></g>',
        bars,
    )
    rate_line = (
        format_html('<polyline class="jw-rate" points="{}"/>', " ".join(points))
        if len(points) > 1
        else ""
    )
    return format_html(
        '<svg class="jw-chart" viewBox="0 0 {w} {h}" role="img" '
        'aria-label="Attempts finished per minute over the last hour">'
        '<line class="jw-axis" x1="{left}" y1="{base}" x2="{right}" y2="{base}"/>'
        '<text x="{left_label}" y="{top_label}" class="jw-label">{peak}/min</text>'
        '<text x="{left_label}" y="{base}" class="jw-label">0</text>'
        '<text x="{left}" y="{h}" class="jw-label">-60 min</text>'
        '<text x="{right}" y="{h}" class="jw-label" text-anchor="end">now</text>'
        "{bars}{rate}"
        '<a href="{completed_url}"><text x="{legend_ok}" y="{top_label}" '
        'class="jw-label jw-ok-text">'
        "■ succeeded</text></a>"
        '<a href="{failed_url}"><text x="{legend_failed}" y="{top_label}" '
        'class="jw-label jw-failed-text">■ failed</text></a>'
        '<text x="{legend_rate}" y="{top_label}" class="jw-label jw-rate-text">'
        "— failure rate</text>"
        "</svg>",
        w=WIDTH,
        h=HEIGHT,
        left=LEFT,
        right=WIDTH - 4,
        base=TOP + plot_h,
        left_label=2,
        top_label=TOP + 8,
        peak=peak,
        bars=bar_markup,
        rate=rate_line,
        completed_url=completed_url,
        failed_url=failed_url,
        legend_ok=WIDTH - 300,
        legend_failed=WIDTH - 200,
        legend_rate=WIDTH - 120,
    )
