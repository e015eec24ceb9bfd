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


def celery_argv(role: str, *, name: str | None = None) -> list[str]:
    from django.conf import settings

    from jobweaver_site.celeryconfig import RUN_JOB_QUEUE, SCHEDULER_QUEUE

    # Celery sets the root logger's level from --loglevel once Django's LOGGING is in place:
    # a fixed INFO here made JOBWEAVER_LOG_LEVEL apply to the web process only.
    loglevel = settings.JOBWEAVER_LOG_LEVEL
    if role == "beat":
        return ["beat", "--loglevel", loglevel, "--max-interval", "1"]

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


USAGE = f"""usage: python -m jobweaver_site.workers {"|".join(ROLES)} [name]
       python -m jobweaver_site.workers {"|".join(ROLES)} --dry-run   (print the Celery command)
       python -m jobweaver_site.workers probe {"|".join(ROLES)}       (liveness: exit 0 or 1)"""


def _keep_alive_signals(role: str) -> None:
    """Touch the role's liveness file when the process shows progress (apps/core/liveness.py);
    the executor touches it from its presence loop."""
    from celery import signals
    from jobweaver.core import liveness

    def touch(**kwargs) -> None:
        liveness.touch(role)

    if role == "scheduler":
        signals.worker_ready.connect(touch, weak=False)
        signals.task_postrun.connect(touch, weak=False)
    elif role == "beat":
        signals.beat_init.connect(touch, weak=False)
        signals.after_task_publish.connect(touch, weak=False)


def main(argv: list[str]) -> None:
    if argv[:1] == ["probe"] and len(argv) == 2 and argv[1] in ROLES:
        from jobweaver.core.liveness import probe  # no Django: probes must stay cheap

        alive, reason = probe(argv[1])
        print(reason, file=sys.stdout if alive else sys.stderr)
        raise SystemExit(0 if alive else 1)
    wants_help = bool({"-h", "--help"} & set(argv[:2]))
    if wants_help or len(argv) < 1 or argv[0] not in ROLES:
        print(USAGE, file=sys.stdout if wants_help else sys.stderr)
        raise SystemExit(0 if wants_help else 2)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobweaver_site.settings")
    # Read by the apps' worker hooks: the executor registers for flow control, the scheduler
    # listens for freed credits.
    os.environ["JOBWEAVER_WORKER_ROLE"] = argv[0]
    import django

    django.setup()
    from django.conf import settings
    from jobweaver.core import metrics, tracing

    from jobweaver_site.celery import app

    if argv[1:2] == ["--dry-run"]:
        # Settings, apps and the Celery app load; nothing connects or starts (compose's CI).
        print(" ".join(["celery", *celery_argv(argv[0])]))
        return
    # Counters of this process, on a port of its own (why not multiprocess: apps/core/metrics.py).
    metrics.serve(settings.JOBWEAVER_METRICS_PORT)
    tracing.configure(argv[0])  # OpenTelemetry export when OTEL_EXPORTER_OTLP_ENDPOINT is set
    _keep_alive_signals(argv[0])

    app.start(celery_argv(argv[0], name=argv[1] if len(argv) > 1 else None))


if __name__ == "__main__":
    main(sys.argv[1:])
