"""gunicorn for the web process (dev stack and compose):
`gunicorn -c jobweaver_site/gunicorn.conf.py jobweaver_site.wsgi`.

Threads (gthread) rather than many processes: a request mostly waits on PostgreSQL, and each
thread keeps its own database connection (CONN_MAX_AGE), so connections are reused without ever
being shared across threads. Each worker warms up (its views' imports, its Kafka producer, its
threads' database connections) before it takes requests, so the first submits after a start do
not pay for them.
"""

import os
import tempfile
import threading
import time

bind = os.environ.get("JOBWEAVER_WEB_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("JOBWEAVER_WEB_WORKERS", "2"))
threads = int(os.environ.get("JOBWEAVER_WEB_THREADS", "8"))
worker_class = "gthread"
accesslog = "-"
timeout = 60
graceful_timeout = 30

# /metrics must count what every gunicorn worker did, whichever one answers the scrape:
# prometheus-client's multiprocess mode (per-worker files in one directory, summed at scrape
# time). Set before any worker imports prometheus_client; a fresh directory per start, so
# counters of a previous run never leak in. Workers of Celery do not fork: they serve their own
# port instead (apps/core/metrics.py).
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="jobweaver-metrics-")


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


# How long a new worker may spend warming up before it takes requests: room for the Kafka
# producer's warm-up (jobweaver.scheduler.dispatch.warm_up_publisher; bench/NOTES.md). With the
# broker away it would take longer, and the worker serves anyway (a submit is accepted into
# PostgreSQL without Kafka) while the warm-up goes on in its thread.
WARM_UP_WAIT_SECONDS = 3.0


def post_worker_init(worker):
    """Warm the worker before it takes its first request, which otherwise paid for it: the
    URL configuration's imports (every view), the Kafka producer's connection and producer
    id, and each request thread's database connection, so a first job was late to RUNNING by
    whatever of the warm-up was left (bench/NOTES.md)."""
    from django.urls import reverse

    from jobweaver.core import collector
    from jobweaver.scheduler.dispatch import warm_up_publisher

    deadline = time.monotonic() + WARM_UP_WAIT_SECONDS
    publisher = threading.Thread(target=warm_up_publisher, name="warm-up", daemon=True)
    publisher.start()
    reverse("api-schema")  # populates the URL resolver: imports every URLconf and view
    _warm_request_threads(worker, deadline)
    publisher.join(max(deadline - time.monotonic(), 0))
    collector.settle_after_start()  # what the worker loaded, frozen; rarer collections


def _warm_request_threads(worker, deadline: float) -> None:
    """Start every request thread of the worker's pool (gthread) now, each with its database
    connection open and warm: a submit's statements prepared and past their first plans."""
    from jobweaver.accounts.services import api_token_warm_up
    from jobweaver.core.db import warm_pool_connections
    from jobweaver.jobs.selectors import active_job_count_warm_up
    from jobweaver.scheduler.dispatch import warm_up_dispatch

    pool = getattr(worker, "tpool", None)
    if pool is None:  # another worker class
        return
    timeout = max(deadline - time.monotonic(), 0)
    statements = (api_token_warm_up, active_job_count_warm_up, warm_up_dispatch)
    for error in warm_pool_connections(pool, worker.cfg.threads, timeout, statements)[:1]:
        worker.log.warning("request thread warm-up failed: %s", error)
