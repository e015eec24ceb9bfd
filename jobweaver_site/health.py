"""Liveness and readiness probes (no authentication)."""

from django.db import connection
from django.db.utils import DatabaseError
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from apps.core.kafka import broker_reachable
from apps.scheduler.flow import live_executors


@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request):
    checks = {"postgresql": False, "kafka": broker_reachable(timeout=2.0)}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["postgresql"] = True
    except DatabaseError:
        pass
    ready = all(checks.values())
    body = {"status": "ok" if ready else "unavailable", **checks}
    if checks["postgresql"]:
        # Informative, not a readiness condition: the web accepts jobs with no executor live
        # (they wait in PostgreSQL); an operator must hear about it all the same.
        body["liveExecutors"] = live = len(live_executors())
        body["warnings"] = [] if live else ["no live executor: jobs wait in PostgreSQL"]
    return JsonResponse(body, status=200 if ready else 503)
