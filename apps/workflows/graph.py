"""A workflow drawn as SVG on the server (the admin's workflow page, ARCHITECTURE §16). Pure: the
nodes in, the markup out, every text escaped.

Layout: a job's column is its depth (the longest path to it from a job without dependencies),
so every edge points right; inside a column jobs keep their submitted order. Each node is a box
coloured by its status and a link to its job; each edge a curve from a dependency's right side
to its dependent's left side. Fifty jobs stay readable: columns are as tall as their jobs, and
the picture scrolls when it is larger than the page.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.html import escape

NODE_WIDTH, NODE_HEIGHT = 150, 30
COLUMN_GAP, ROW_GAP, MARGIN = 60, 14, 12
LABEL_CHARS = 18

# Status → (fill, text) colours; the dashboard's palette.
COLOURS = {
    "WAITING": ("#e5e7eb", "#374151"),
    "PENDING": ("#dbeafe", "#1e3a8a"),
    "DISPATCHED": ("#bfdbfe", "#1e3a8a"),
    "RUNNING": ("#fde68a", "#78350f"),
    "COMPLETED": ("#bbf7d0", "#14532d"),
    "FAILED": ("#fecaca", "#7f1d1d"),
    "CANCELLED": ("#e5e7eb", "#6b7280"),
}


@dataclass(frozen=True)
class GraphNode:
    ref: str
    status: str
    depends_on: tuple[str, ...]
    href: str = ""  # the job's page


def columns(nodes: list[GraphNode]) -> dict[str, int]:
    """Each ref's depth: 0 without dependencies, else one more than its deepest dependency."""
    by_ref = {node.ref: node for node in nodes}
    depth: dict[str, int] = {}
    for node in nodes:
        stack = [(node.ref, False)]
        while stack:
            ref, expanded = stack.pop()
            if ref in depth:
                continue
            parents = [p for p in by_ref[ref].depends_on if p in by_ref]
            if expanded or not parents:
                depth[ref] = 1 + max((depth[p] for p in parents), default=-1)
                continue
            stack.append((ref, True))
            stack.extend((p, False) for p in parents if p not in depth)
    return depth


def svg(nodes: list[GraphNode]) -> str:
    """The workflow as one <svg> element."""
    depth = columns(nodes)
    rows: dict[int, int] = {}
    place: dict[str, tuple[int, int]] = {}
    for node in nodes:
        column = depth[node.ref]
        row = rows.get(column, 0)
        rows[column] = row + 1
        place[node.ref] = (
            MARGIN + column * (NODE_WIDTH + COLUMN_GAP),
            MARGIN + row * (NODE_HEIGHT + ROW_GAP),
        )
    width = MARGIN * 2 + (max(depth.values(), default=0) + 1) * (NODE_WIDTH + COLUMN_GAP)
    height = MARGIN * 2 + max(rows.values(), default=1) * (NODE_HEIGHT + ROW_GAP)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="jw-workflow-graph" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="workflow of {len(nodes)} jobs">',
        '<g fill="none" stroke="#9ca3af" stroke-width="1.2">',
    ]
    for node in nodes:
        x2, y2 = place[node.ref]
        for parent in node.depends_on:
            if parent not in place:
                continue
            x1, y1 = place[parent]
            start = (x1 + NODE_WIDTH, y1 + NODE_HEIGHT / 2)
            end = (x2, y2 + NODE_HEIGHT / 2)
            bend = (end[0] - start[0]) / 2
            parts.append(
                f'<path d="M{start[0]},{start[1]} C{start[0] + bend},{start[1]} '
                f'{end[0] - bend},{end[1]} {end[0]},{end[1]}"/>'
            )
    parts.append("</g>")
    for node in nodes:
        x, y = place[node.ref]
        fill, ink = COLOURS.get(node.status, ("#ffffff", "#111827"))
        label = node.ref if len(node.ref) <= LABEL_CHARS else node.ref[: LABEL_CHARS - 1] + "…"
        box = (
            f'<g class="jw-node" data-ref="{escape(node.ref)}" data-status="{escape(node.status)}">'
            f"<title>{escape(node.ref)}: {escape(node.status)}</title>"
            f'<rect x="{x}" y="{y}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="6" '
            f'fill="{fill}" stroke="{ink}" stroke-width="1"/>'
            f'<text x="{x + 8}" y="{y + 19}" fill="{ink}" font-size="12" '
            f'font-family="sans-serif">{escape(label)}</text>'
            f'<text x="{x + NODE_WIDTH - 8}" y="{y + 19}" fill="{ink}" font-size="9" '
            f'text-anchor="end" font-family="sans-serif">{escape(node.status)}</text></g>'
        )
        if node.href:
            box = f'<a href="{escape(node.href)}">{box}</a>'
        parts.append(box)
    parts.append("</svg>")
    return "".join(parts)
