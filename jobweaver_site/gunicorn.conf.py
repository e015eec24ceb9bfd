"""gunicorn for the web process (dev stack and compose):
`gunicorn -c jobweaver_site/gunicorn.conf.py jobweaver_site.wsgi`.

Threads (gthread) rather than many processes: a request mostly waits on PostgreSQL, and each
thread keeps its own database connection (CONN_MAX_AGE), so connections are reused without ever
being shared across threads. Each worker warms its Kafka producer right after it starts, so the
first submit after a start does not wait for the broker connection.
"""

import os
import tempfile
import threading

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


def post_worker_init(worker):
    from apps.scheduler.dispatch import warm_up_publisher

    threading.Thread(target=warm_up_publisher, name="warm-up", daemon=True).start()
