"""GET /metrics on the web: this process's counters (every gunicorn worker's, in multiprocess
mode) plus the cluster gauges computed at scrape time (apps/scheduler/metrics.py).

Served by a middleware placed first, before host validation and the HTTPS redirect: Prometheus
scrapes each pod by its IP over plain HTTP from inside the cluster, which ALLOWED_HOSTS and
SECURE_SSL_REDIRECT would refuse. Keep /metrics off public ingress, or set
JOBWEAVER_METRICS_TOKEN and give Prometheus `authorization: {credentials: <token>}`.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.utils.crypto import constant_time_compare

from jobweaver.core.metrics import exposition
from jobweaver.scheduler.metrics import ClusterCollector

PATH = "/metrics"


def metrics(request) -> HttpResponse:
    token = settings.JOBWEAVER_METRICS_TOKEN
    if token and not constant_time_compare(
        request.headers.get("Authorization", ""), f"Bearer {token}"
    ):
        return HttpResponse("metrics need a bearer token\n", status=401, content_type="text/plain")
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
    body, content_type = exposition(ClusterCollector())
    return HttpResponse(body, content_type=content_type)


class MetricsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path == PATH:
            return metrics(request)
        return self.get_response(request)
