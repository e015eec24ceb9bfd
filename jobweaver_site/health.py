"""Liveness and readiness probes (no authentication).

/readyz tells anyone whether PostgreSQL and Kafka answer; what it knows of the platform (live
executors, queues without one) only operators see: a logged-in user holding
jobs.view_all_jobs (ARCHITECTURE §17).

/readyz is cheap whoever calls it and however often: the Kafka probe (a metadata request over a
new admin client) runs at most once per JOBWEAVER_READYZ_KAFKA_CACHE_SECONDS per process, with a
short timeout, and concurrent callers share that one probe instead of each opening a client.
"""

import threading
import time

from django.conf import settings
from django.db import connection, transaction
from django.db.utils import DatabaseError
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from jobweaver.core.kafka import broker_reachable
from jobweaver.scheduler.flow import live_executors
from jobweaver.scheduler.selectors import queues_without_executor

VIEW_ALL_JOBS = "jobweaver_jobs.view_all_jobs"
_kafka_lock = threading.Lock()
_kafka_probe: tuple[float, bool] | None = None  # (monotonic time of the probe, reachable)


def kafka_reachable() -> bool:
    """The broker's reachability, probed at most once per cache period in this process."""
    global _kafka_probe
    with _kafka_lock:
        now = time.monotonic()
        if (
            _kafka_probe is None
            or now - _kafka_probe[0] >= settings.JOBWEAVER_READYZ_KAFKA_CACHE_SECONDS
        ):
            reachable = broker_reachable(timeout=settings.JOBWEAVER_READYZ_KAFKA_TIMEOUT_SECONDS)
            _kafka_probe = (time.monotonic(), reachable)
        return _kafka_probe[1]


def _is_operator(request) -> bool:
    user = getattr(request, "user", None)
    return user is not None and user.is_authenticated and user.has_perm(VIEW_ALL_JOBS)


@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request):
    checks = {"postgresql": False, "kafka": kafka_reachable()}
    try:
        # A short statement timeout: a stalled server answers "not ready" within the probe's
        # own timeout (connecting is bounded by JOBWEAVER_DB_CONNECT_TIMEOUT_SECONDS).
        timeout_ms = round(settings.JOBWEAVER_READYZ_DB_TIMEOUT_SECONDS * 1000)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT set_config('statement_timeout', %s, true)", [str(timeout_ms)])
            cursor.execute("SELECT 1")
        checks["postgresql"] = True
    except DatabaseError:
        pass
    ready = all(checks.values())
    body = {"status": "ok" if ready else "unavailable", **checks}
    if checks["postgresql"] and _is_operator(request):
        # Informative, not a readiness condition: the web accepts jobs with no executor live
        # (they wait in PostgreSQL); an operator must hear about it all the same.
        body["liveExecutors"] = live = len(live_executors())
        body["warnings"] = [] if live else ["no live executor: jobs wait in PostgreSQL"]
        body["queuesWithoutExecutor"] = unserved = queues_without_executor()
        body["warnings"] += [
            f"queue {queue!r} has waiting work and no live executor serving it"
            for queue in unserved
        ]
    return JsonResponse(body, status=200 if ready else 503)
