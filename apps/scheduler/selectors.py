"""Reads of the dispatch controls: pauses, concurrency limits and queues, and their one outside
shape (camelCase, times in ISO-8601 UTC) shared by the API, the command line and the dashboard;
and which queues have waiting work that no live executor serves (ARCHITECTURE §15)."""

from __future__ import annotations

from django.db import connection
from django.db.models import Count, Exists, OuterRef, Subquery
from django.db.models.expressions import RawSQL
from django.db.models.functions import Coalesce

from jobweaver.accounts.selectors import holds
from jobweaver.conf import settings
from jobweaver.core.timeutil import iso
from jobweaver.scheduler.flow import LIVE, live_executors
from jobweaver.scheduler.models import (
    DEFAULT_QUEUE_WEIGHT,
    PENDING_DUE_ROWS,
    ConcurrencyLimit,
    ExecutionStatus,
    ExecutorRegistration,
    JobExecution,
    Pause,
    PauseScope,
    Queue,
    status_literal,
)

# Whose jobs the queues' counts include: everyone's with this permission, one's own otherwise.
VIEW_ALL_JOBS = "jobweaver_jobs.view_all_jobs"
IN_FLIGHT = (ExecutionStatus.DISPATCHED, ExecutionStatus.RUNNING)


def waiting_queues() -> list[str]:
    """The queues with PENDING work in line, skipping through jw_execution_queue_line one
    queue at a time (a probe per queue, however long its backlog)."""
    table = JobExecution._meta.db_table
    in_line = f"status = {status_literal(ExecutionStatus.PENDING)} AND NOT set_aside"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH RECURSIVE queues(name) AS (
                (SELECT queue_name FROM {table} WHERE {in_line}
                 ORDER BY queue_name, job_type LIMIT 1)
                UNION ALL
                SELECT (SELECT queue_name FROM {table}
                        WHERE {in_line} AND queue_name > queues.name
                        ORDER BY queue_name, job_type LIMIT 1)
                FROM queues WHERE queues.name IS NOT NULL
            )
            SELECT name FROM queues WHERE name IS NOT NULL
            """
        )
        return [name for (name,) in cursor.fetchall()]


def queue_due_work() -> dict[str, tuple[int, float]]:
    """Per queue with due PENDING work: how many, and how long the oldest has waited (seconds,
    database clock). The clock is read once (a scalar subquery), so the due time bounds the
    scan of jw_execution_pending_due (apps/scheduler/metrics.py)."""
    table = JobExecution._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT queue_name, count(*),
                GREATEST(EXTRACT(EPOCH FROM clock_timestamp() - min(next_run_at)), 0)
            FROM {table}
            WHERE {PENDING_DUE_ROWS} AND next_run_at <= (SELECT clock_timestamp())
            GROUP BY queue_name
            """
        )
        return {queue: (count, float(age)) for queue, count, age in cursor.fetchall()}


def queues_without_executor() -> list[str]:
    """Queues whose work waits with no live executor serving them: it stays PENDING, safe and
    unattempted, until one starts (ARCHITECTURE §15)."""
    served = {queue for executor in live_executors() for queue in executor.queues}
    return [queue for queue in waiting_queues() if queue not in served]


def pause_list() -> list[Pause]:
    """Every pause, by scope and name."""
    return list(Pause.objects.order_by("scope", "name"))


def concurrency_limit_list() -> list[ConcurrencyLimit]:
    """Every concurrency limit, by pattern."""
    return list(ConcurrencyLimit.objects.order_by("pattern"))


def pause_to_dict(pause: Pause) -> dict:
    return {
        "scope": pause.scope,
        "name": pause.name,
        "reason": pause.reason,
        "pausedBy": pause.paused_by,
        "pausedAt": iso(pause.paused_at),
    }


def limit_to_dict(limit: ConcurrencyLimit) -> dict:
    return {
        "pattern": limit.pattern,
        "maxRunning": limit.max_running,
        "maxPerSecond": limit.max_per_second,
        "global": limit.is_global,
        "updatedAt": iso(limit.updated_at),
    }


def queue_list(*, user=None) -> list[dict]:
    """Every queue that has work waiting or in flight, a live executor or settings, by name,
    as `queue_to_dict` shapes it (ARCHITECTURE §15). The counts are of every owner's jobs for
    `user=None` (a trusted caller: the CLI, the admin) and holders of view_all_jobs, of the
    user's own otherwise; `running` counts work dispatched or running, as the cap does."""
    executions = JobExecution.objects.filter(status__in=[ExecutionStatus.PENDING, *IN_FLIGHT])
    if user is not None and not holds(user, VIEW_ALL_JOBS):
        executions = executions.filter(submitted_by=user)
    waiting: dict[str, int] = {}
    running: dict[str, int] = {}
    for queue, status, count in (
        executions.values_list("queue_name", "status")
        .annotate(n=Count("id"))
        .values_list("queue_name", "status", "n")
    ):
        counts = waiting if status == ExecutionStatus.PENDING else running
        counts[queue] = counts.get(queue, 0) + count
    executors: dict[str, int] = {}
    for executor in live_executors():
        for queue in executor.queues:
            executors[queue] = executors.get(queue, 0) + 1
    configured = {queue.name: queue for queue in Queue.objects.all()}
    paused = set(Pause.objects.filter(scope=PauseScope.QUEUE).values_list("name", flat=True))
    names = sorted({*waiting, *running, *executors, *configured})
    return [
        queue_to_dict(
            name,
            configured.get(name),
            waiting=waiting.get(name, 0),
            running=running.get(name, 0),
            executors=executors.get(name, 0),
            paused=name in paused,
        )
        for name in names
    ]


def queue_counts() -> dict:
    """Annotations of a Queue queryset with each queue's work and executors now (every owner's
    jobs): waiting_now, running_now, executors_now, paused_now."""
    executions = JobExecution.objects.filter(queue_name=OuterRef("name")).order_by()

    def count(rows) -> Coalesce:
        return Coalesce(
            Subquery(rows.values("queue_name").annotate(n=Count("id")).values("n")[:1]), 0
        )

    registrations = ExecutorRegistration._meta.db_table
    return {
        "waiting_now": count(executions.filter(status=ExecutionStatus.PENDING)),
        "running_now": count(executions.filter(status__in=IN_FLIGHT)),
        "executors_now": RawSQL(
            f"SELECT count(*) FROM {registrations} r WHERE jsonb_exists(r.queues, "
            f"{Queue._meta.db_table}.name) AND r.{LIVE}",
            [settings.JOBWEAVER_WORKER_TTL_SECONDS],
        ),
        "paused_now": Exists(Pause.objects.filter(scope=PauseScope.QUEUE, name=OuterRef("name"))),
    }


def queue_get(name: str, *, user=None) -> dict:
    """One queue as `queue_list` shows it (zeros and defaults when nothing is known of it)."""
    for queue in queue_list(user=user):
        if queue["name"] == name:
            return queue
    return queue_to_dict(name, None, waiting=0, running=0, executors=0, paused=False)


def queue_to_dict(
    name: str, configured: Queue | None, *, waiting: int, running: int, executors: int, paused: bool
) -> dict:
    return {
        "name": name,
        "waiting": waiting,
        "running": running,
        "executors": executors,
        "maxRunning": configured.max_running if configured else None,
        "weight": configured.weight if configured else DEFAULT_QUEUE_WEIGHT,
        "paused": paused,
    }
