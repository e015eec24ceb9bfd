"""GET /metrics on the web: this process's counters (every gunicorn worker's, in multiprocess
mode) plus the cluster gauges computed at scrape time (apps/scheduler/metrics.py).

Always behind a bearer token (ARCHITECTURE §17): `Authorization: Bearer
<JOBWEAVER_METRICS_TOKEN>`, compared in constant time; with no token configured the page does
not exist (404), so a deployment that never set one exposes nothing. It is an ordinary view:
Django's ALLOWED_HOSTS check runs first (a bad Host gets 400, not metrics). Prometheus scrapes
over plain HTTP from inside the network, so it is exempt from the HTTPS redirect
(SECURE_REDIRECT_EXEMPT); the Helm chart adds each pod's IP to the allowed hosts, since
Prometheus names the pod by its IP.
"""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpResponse
from django.utils.crypto import constant_time_compare
from django.views.decorators.csrf import csrf_exempt

from jobweaver.core.metrics import exposition
from jobweaver.scheduler.metrics import ClusterCollector


@csrf_exempt  # no session, no form: a POST is 405 below, not a CSRF page
def metrics(request) -> HttpResponse:
    token = settings.JOBWEAVER_METRICS_TOKEN
    if not token:
        raise Http404("metrics are off: JOBWEAVER_METRICS_TOKEN is not set")
    if not constant_time_compare(request.headers.get("Authorization", ""), f"Bearer {token}"):
        return HttpResponse(
            "metrics need a bearer token\n",
            status=401,
            content_type="text/plain",
            headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
        )
    if request.method not in ("GET", "HEAD"):
        return HttpResponse(status=405, headers={"Allow": "GET, HEAD"})
    body, content_type = exposition(ClusterCollector())
    return HttpResponse(body, content_type=content_type)
