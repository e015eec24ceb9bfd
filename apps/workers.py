"""JobWeaver's worker processes (imported once Django is set up): `manage.py jobweaver worker
executor|scheduler|beat` in any project, `python -m jobweaver_site.workers …` in the reference
site. One place decides how each
role runs (queue names carry the topic prefix), so the Procfile, compose, Helm and the tests
start identical processes.

Pools: librdkafka clients are not fork-safe, so no role uses Celery's prefork pool (which forks
children after the parent opened its Kafka clients). Executors run JOBWEAVER_EXECUTOR_CONCURRENCY
attempts at once (or --concurrency) on slot threads of their own (apps/executor/slots.py), and
Celery's `threads` pool holds the run-job records that bring them: the steps are mostly waiting
and PostgreSQL I/O, so threads overlap well, and the transport's offset tracking keeps commits
correct when records finish out of order. With `--pool processes` (JOBWEAVER_EXECUTOR_POOL) each
thread runs its attempt in a child process of JobWeaver's own pool, started by forkserver
(apps/executor/process_pool.py), which can be killed at the hard timeout. The scheduler runs
`solo`: one dispatch at a time is what it needs. Both scale out by running more processes
(Kafka spreads the partitions).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from celery import signals

from jobweaver.celery import app
from jobweaver.celeryconfig import RUN_JOB_QUEUE, SCHEDULER_QUEUE
from jobweaver.conf import settings
from jobweaver.core import collector, kafka, liveness, metrics, tracing
from jobweaver.core.errors import InvalidRequest
from jobweaver.core.names import checked_queue_name

ROLES = ("executor", "scheduler", "beat")
POOLS = ("threads", "processes")


class WorkerOptionError(ValueError):
    """An option the worker cannot honour; the message says why, in one line."""


@dataclass(frozen=True)
class WorkerOptions:
    role: str
    hostname: str | None = None
    concurrency: int | None = None
    pool: str | None = None  # None: JOBWEAVER_EXECUTOR_POOL
    max_tasks_per_child: int | None = None  # None: JOBWEAVER_EXECUTOR_MAX_TASKS_PER_CHILD
    max_memory_per_child: int | None = None  # MB; None: ..._MAX_MEMORY_PER_CHILD_MB
    # None: JOBWEAVER_EXECUTOR_QUEUES (default ["default"]).
    queues: tuple[str, ...] | None = None

    @property
    def chosen_pool(self) -> str:
        if self.pool is not None:
            return self.pool
        return settings.JOBWEAVER_EXECUTOR_POOL if self.role == "executor" else "threads"

    @property
    def queues_given(self) -> bool:
        return self.queues is not None

    def check(self) -> WorkerOptions:
        if self.role not in ROLES:
            raise WorkerOptionError(f"the role is one of {', '.join(ROLES)}, not {self.role!r}")
        pool = self.chosen_pool
        if pool == "prefork":
            raise WorkerOptionError(
                "--pool prefork forks after the Kafka clients started (librdkafka is not "
                "fork-safe): use --pool processes, whose children start by forkserver"
            )
        if pool not in POOLS:
            raise WorkerOptionError(f"--pool is threads or processes, not {pool!r}")
        if pool == "processes" and self.role != "executor":
            raise WorkerOptionError("--pool processes is for executors")
        for flag, value in (
            ("--max-tasks-per-child", self.max_tasks_per_child),
            ("--max-memory-per-child", self.max_memory_per_child),
        ):
            if value is not None and pool != "processes":
                raise WorkerOptionError(f"{flag} needs --pool processes")
            if value is not None and value < 1:
                raise WorkerOptionError(f"{flag} is at least 1, not {value}")
        if self.concurrency is not None and not 1 <= self.concurrency <= 512:
            raise WorkerOptionError("--concurrency is a number of threads from 1 to 512")
        if self.queues is not None and not self.queues:
            raise WorkerOptionError("--queues names at least one queue")
        for queue in self.queues or ():
            try:
                checked_queue_name(queue, "--queues")
            except InvalidRequest as error:
                raise WorkerOptionError(f"{error.message}, not {queue!r}") from None
        return self


def celery_argv(options: WorkerOptions) -> list[str]:
    """The Celery command line of a role."""
    # Celery sets the root logger's level from --loglevel once Django's LOGGING is in place.
    loglevel = settings.JOBWEAVER_LOG_LEVEL
    if options.role == "beat":
        return ["beat", "--loglevel", loglevel, "--max-interval", "1"]
    queue = {"executor": RUN_JOB_QUEUE, "scheduler": SCHEDULER_QUEUE}[options.role]
    if options.role == "executor":
        slots = options.concurrency or settings.JOBWEAVER_EXECUTOR_CONCURRENCY
        # Celery's threads hold run-job records, not attempts (the slots run those,
        # apps/executor/slots.py): as many as the deliveries flow control may let the executor
        # hold, so a record is never kept waiting by Celery while a slot is free.
        records = slots * max(
            settings.JOBWEAVER_DISPATCH_PREFETCH, settings.JOBWEAVER_DISPATCH_PREFETCH_MAX
        )
        pool = ["--pool", "threads", "--concurrency", str(records)]
    else:
        pool = ["--pool", "solo"]
    return [
        "worker",
        *("--queues", queue),
        *pool,
        *("--hostname", options.hostname or f"{options.role}-{os.getpid()}@%h"),
        *("--loglevel", loglevel),
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]


def _keep_alive_signals(role: str) -> None:
    """Touch the role's liveness file when the process shows progress (core/liveness.py); the
    executor touches it from its presence loop."""

    def touch(**kwargs) -> None:
        liveness.touch(role)

    if role == "scheduler":
        signals.worker_ready.connect(touch, weak=False)
        signals.task_postrun.connect(touch, weak=False)
    elif role == "beat":
        signals.beat_init.connect(touch, weak=False)
        signals.after_task_publish.connect(touch, weak=False)


def _settle_after_start(role: str) -> None:
    """Freeze what the started process loaded, and collect less often (core/collector.py)."""

    def settle(**kwargs) -> None:
        collector.settle_after_start()

    if role == "beat":
        signals.beat_init.connect(settle, weak=False)
    else:
        signals.worker_ready.connect(settle, weak=False)


def run(options: WorkerOptions, *, dry_run: bool = False) -> str | None:
    """Start the role in this process (Django is set up); with `dry_run`, return its Celery
    command line instead: settings, apps and the Celery app load, nothing connects."""
    options.check()
    argv = celery_argv(options)
    if dry_run:
        return " ".join(["celery", *argv])
    # Read by the apps' worker hooks: the executor registers for flow control, the scheduler
    # listens for freed credits; and by the log lines' service field.
    os.environ["JOBWEAVER_WORKER_ROLE"] = options.role
    if options.concurrency is not None:
        settings.JOBWEAVER_EXECUTOR_CONCURRENCY = options.concurrency  # the executor's slots
    if options.queues_given:
        settings.JOBWEAVER_EXECUTOR_QUEUES = list(options.queues)  # what it registers to serve
    # Read by the executor's worker_init hook, which starts the process pool.
    settings.JOBWEAVER_EXECUTOR_POOL = options.chosen_pool
    if options.max_tasks_per_child is not None:
        settings.JOBWEAVER_EXECUTOR_MAX_TASKS_PER_CHILD = options.max_tasks_per_child
    if options.max_memory_per_child is not None:
        settings.JOBWEAVER_EXECUTOR_MAX_MEMORY_PER_CHILD_MB = options.max_memory_per_child
    if options.role != "beat":
        kafka.ensure_topics()  # the topics it consumes, with their partition counts

    # Counters of this process, on a port of its own (why not multiprocess: core/metrics.py).
    metrics.serve(
        settings.JOBWEAVER_METRICS_PORT,
        bind=settings.JOBWEAVER_METRICS_BIND,
        token=settings.JOBWEAVER_METRICS_TOKEN,
    )
    tracing.configure(options.role)  # OpenTelemetry export when OTEL_EXPORTER_OTLP_ENDPOINT is set
    _keep_alive_signals(options.role)
    _settle_after_start(options.role)
    app.start(argv)
    return None
