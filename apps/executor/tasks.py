"""The executor's Celery tasks and process hooks. Thin: ids in, one service call. Running a
task twice is harmless because the runner fences on the event id."""

import logging
import os
import uuid

from celery.exceptions import Reject
from celery.signals import (
    task_prerun,
    worker_init,
    worker_ready,
    worker_shutdown,
    worker_shutting_down,
)
from django.db import close_old_connections, connection

from jobweaver.celery import app
from jobweaver.conf import settings
from jobweaver.core.db import DATABASE_UNAVAILABLE, warm_connection
from jobweaver.core.kafka import RUN_JOB, topic_name
from jobweaver.core.logcontext import log_context
from jobweaver.core.threads import on_each_thread
from jobweaver.executor import presence, process_pool, shutdown, slots
from jobweaver.executor.runner import attempt_execute, deliveries_execute, worker_identity
from jobweaver.executor.services import attempts_start_warm_up
from jobweaver.scheduler.dispatch import TRACE_HEADER

logger = logging.getLogger(__name__)

# How long the task threads' warm-up may delay the executor's registration (the database away).
WARM_UP_SECONDS = 10.0


@app.task(name="jobweaver.executor.tasks.run_jobs", bind=True)
def run_jobs(self, deliveries: list[list[str | None]]) -> None:
    """The deliveries of one run-job record, [job id, event id, trace id] each (the dispatcher
    sends one record per executor partition and dispatch round). Returns, and so is
    acknowledged, once every attempt it started has ended and its ending committed."""
    try:
        deliveries_execute(deliveries)
    except DATABASE_UNAVAILABLE as exc:
        # As run_job: the record goes back on its topic; the deliveries that did start are
        # fenced when it comes again, the others start then.
        raise Reject(exc, requeue=True) from exc


# The record of one delivery that dispatchers before run_jobs sent: still read, so that records
# on Kafka during an upgrade run.
@app.task(name="jobweaver.executor.tasks.run_job", bind=True)
def run_job(self, job_id: str, event_id: str) -> str | None:
    # The dispatcher's trace header: log lines before the claim (a stale delivery) carry it too.
    trace_id = self.request.get(TRACE_HEADER)
    try:
        with log_context(trace_id=trace_id, job_id=job_id):
            return attempt_execute(job_id=uuid.UUID(job_id), event_id=uuid.UUID(event_id))
    except DATABASE_UNAVAILABLE as exc:
        # PostgreSQL stayed away longer than the runner's retries: put the message back on
        # its topic rather than acknowledge a delivery that was never claimed.
        raise Reject(exc, requeue=True) from exc


RUN_TASKS = {"jobweaver.executor.tasks.run_jobs", "jobweaver.executor.tasks.run_job"}


def _is_executor() -> bool:
    # Set by jobweaver_site.workers; every worker process imports every app's tasks.
    return os.environ.get("JOBWEAVER_WORKER_ROLE") == "executor"


@task_prerun.connect
def reuse_sound_connections(sender=None, **kwargs) -> None:
    """What Django does at the start of a request: drop this thread's connection only if it
    is broken or older than CONN_MAX_AGE (celeryconfig.CELERY_DB_REUSE_MAX keeps Celery from
    closing it after every task)."""
    close_old_connections()
    if getattr(sender, "name", None) in RUN_TASKS:  # `run_jobs` itself is a proxy
        # Without this, Django's health check (CONN_HEALTH_CHECKS) would send `SELECT 1` before
        # every job: one round trip in three on the executor's path. It buys nothing here: the
        # claim is the first statement and runs under retry_while_database_unavailable, which
        # closes a broken connection and reconnects, as the health check would.
        connection.health_check_done = True


@worker_init.connect
def start_process_pool(**kwargs) -> None:
    """`--pool processes`: the children are ready before the first delivery arrives."""
    if _is_executor() and settings.JOBWEAVER_EXECUTOR_POOL == "processes":
        process_pool.pool_start(
            settings.JOBWEAVER_EXECUTOR_CONCURRENCY,
            max_tasks=settings.JOBWEAVER_EXECUTOR_MAX_TASKS_PER_CHILD,
            max_memory_mb=settings.JOBWEAVER_EXECUTOR_MAX_MEMORY_PER_CHILD_MB,
        )


@worker_shutdown.connect
def stop_process_pool(**kwargs) -> None:
    """After the warm shutdown waited for the running attempts: the idle children exit, the
    slot threads close their connections."""
    process_pool.pool_close()
    slots.close()


@worker_ready.connect
def register_executor(sender, **kwargs) -> None:
    """Ready to consume: warm the task threads, then register for flow control
    (apps/executor/presence.py)."""
    if _is_executor():
        _warm_task_threads(sender.pool)
        presence.start(
            consumer=sender,
            queue=topic_name(RUN_JOB),
            slots=settings.JOBWEAVER_EXECUTOR_CONCURRENCY,
            serves=settings.JOBWEAVER_EXECUTOR_QUEUES,
        )


def _warm_task_threads(pool) -> None:
    """Before the executor registers (no delivery is sent to it until then): as many of
    Celery's task threads as there are slots get their database connection, with the start
    statement of an idle executor prepared and past its first plans. The first deliveries
    otherwise paid for both on their way to RUNNING (bench/NOTES.md). Best effort."""
    executor = getattr(pool, "executor", None)  # the threads pool's; not --pool processes
    if executor is None:
        return
    errors = on_each_thread(
        executor,
        settings.JOBWEAVER_EXECUTOR_CONCURRENCY,
        lambda: warm_connection([lambda: attempts_start_warm_up(worker_id=worker_identity())]),
        WARM_UP_SECONDS,
    )
    for error in errors[:1]:
        logger.warning("task thread warm-up failed: %s", error)


@worker_shutting_down.connect
def start_shutdown_grace(**kwargs) -> None:
    """SIGTERM: no more credits for this process at once; attempts still running after the
    grace period are released (shutdown.py)."""
    shutdown.begin(settings.JOBWEAVER_SHUTDOWN_GRACE_SECONDS)
    if _is_executor():
        presence.stop()
