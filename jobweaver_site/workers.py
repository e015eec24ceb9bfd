"""Start a JobWeaver process role: `python -m jobweaver_site.workers executor|scheduler|beat`.

One place decides how each role runs (queue names carry the topic prefix), so the Procfile, the
tests and compose.yaml start identical processes.

Pools: librdkafka clients are not fork-safe, so no role uses the prefork pool (which forks
children after the parent opened its Kafka clients). Executors run the `threads` pool with
JOBWEAVER_EXECUTOR_CONCURRENCY threads: the steps are mostly waiting (SLEEP, simulated HTTP) and
PostgreSQL I/O, so threads overlap well, and the transport's offset tracking keeps commits
correct when they finish out of order. The scheduler runs `solo`: one dispatch at a time is what
it needs. Both scale out by running more processes (Kafka spreads the partitions over them).
"""

from __future__ import annotations

import os
import sys

ROLES = ("executor", "scheduler", "beat")


def celery_argv(role: str, *, name: str | None = None, loglevel: str = "INFO") -> list[str]:
    from jobweaver_site.celeryconfig import RUN_JOB_QUEUE, SCHEDULER_QUEUE

    if role == "beat":
        return ["beat", "--loglevel", loglevel, "--max-interval", "1"]
    from django.conf import settings

    queue = {"executor": RUN_JOB_QUEUE, "scheduler": SCHEDULER_QUEUE}[role]
    if role == "executor":
        pool = ["--pool", "threads", "--concurrency", str(settings.JOBWEAVER_EXECUTOR_CONCURRENCY)]
    else:
        pool = ["--pool", "solo"]
    return [
        "worker",
        *("--queues", queue),
        *pool,
        *("--hostname", name or f"{role}-{os.getpid()}@%h"),
        *("--loglevel", loglevel),
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]


def main(argv: list[str]) -> None:
    if len(argv) < 1 or argv[0] not in ROLES:
        print(f"usage: python -m jobweaver_site.workers {'|'.join(ROLES)} [name]", file=sys.stderr)
        raise SystemExit(2)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobweaver_site.settings")
    # Read by the apps' worker hooks: the executor registers for flow control, the scheduler
    # listens for freed credits.
    os.environ["JOBWEAVER_WORKER_ROLE"] = argv[0]
    import django

    django.setup()
    from django.conf import settings

    from apps.core import metrics
    from jobweaver_site.celery import app

    # Counters of this process, on a port of its own (why not multiprocess: apps/core/metrics.py).
    metrics.serve(settings.JOBWEAVER_METRICS_PORT)

    app.start(celery_argv(argv[0], name=argv[1] if len(argv) > 1 else None))


if __name__ == "__main__":
    main(sys.argv[1:])
