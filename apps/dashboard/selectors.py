"""Reads for the cockpit: the dashboard's figures and the dead-letter desk's groups. Every
figure is computed in a fixed number of queries, on the database clock."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Count, Max, Min, Q, QuerySet
from django.db.models.functions import Left

from jobweaver.executor.models import AttemptOutcome, ExecutionAttempt
from jobweaver.jobs.selectors import discarded_since_failure
from jobweaver.scheduler.flow import live_executors
from jobweaver.scheduler.models import ExecutionStatus, JobExecution

S = ExecutionStatus
FAILED_OUTCOMES = (AttemptOutcome.FAILURE, AttemptOutcome.LOST)
# Dead letters are grouped by the start of their final error: errors that differ only in a long
# tail (a traceback, an id at the end) still land in one group.
GROUP_ERROR_CHARS = 200
CHART_MINUTES = 60


def database_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        (now,) = cursor.fetchone()
    return now


# --- dead letters -------------------------------------------------------------------------------


def dead_letters() -> QuerySet[JobExecution]:
    """FAILED executions an operator has not discarded: what the dead-letter desk shows."""
    return JobExecution.objects.filter(status=S.FAILED).exclude(discarded_since_failure())


def dead_letter_groups(*, limit: int = 100) -> list[dict]:
    """Dead letters grouped by (the start of) their final error, largest group first: `error`,
    `count`, `first_failed_at`, `last_failed_at`."""
    rows = (
        dead_letters()
        .annotate(error=Left("last_error", GROUP_ERROR_CHARS))
        .values("error")
        .annotate(
            count=Count("id"),
            first_failed_at=Min("finished_at"),
            last_failed_at=Max("finished_at"),
        )
        .order_by("-count", "-last_failed_at")
    )
    return list(rows[:limit])


def dead_letter_job_ids(*, error: str | None = None) -> list[uuid.UUID]:
    """Ids of the dead letters, all or those of one group (see `dead_letter_groups`)."""
    executions = dead_letters()
    if error is not None:
        executions = executions.annotate(error=Left("last_error", GROUP_ERROR_CHARS)).filter(
            error=error
        )
    return list(executions.order_by("finished_at").values_list("job_id", flat=True))


# --- the dashboard ------------------------------------------------------------------------------


def status_counts(*, now: datetime) -> dict:
    """Counts by status in one query, with PENDING split into fresh and retrying, the dead
    letters still waiting for an operator, and the oldest due job's due time."""
    pending = Q(status=S.PENDING)
    return JobExecution.objects.aggregate(
        pending=Count("id", filter=pending & Q(retry_count=0)),
        retrying=Count("id", filter=pending & Q(retry_count__gt=0)),
        due=Count("id", filter=pending & Q(next_run_at__lte=now)),
        delayed=Count("id", filter=pending & Q(next_run_at__gt=now)),
        dispatched=Count("id", filter=Q(status=S.DISPATCHED)),
        running=Count("id", filter=Q(status=S.RUNNING)),
        completed=Count("id", filter=Q(status=S.COMPLETED)),
        failed=Count("id", filter=Q(status=S.FAILED)),
        dead_letters=Count("id", filter=Q(status=S.FAILED) & ~discarded_since_failure()),
        cancelled=Count("id", filter=Q(status=S.CANCELLED)),
        oldest_due=Min("next_run_at", filter=pending & Q(next_run_at__lte=now)),
    )


@dataclass(frozen=True)
class MinuteBucket:
    start: datetime
    succeeded: int
    failed: int

    @property
    def finished(self) -> int:
        return self.succeeded + self.failed


def attempts_per_minute(*, now: datetime, minutes: int = CHART_MINUTES) -> list[MinuteBucket]:
    """Attempts that finished in each of the last `minutes` minutes (oldest first), split into
    succeeded and failed (FAILURE or LOST): throughput and failure rate over time."""
    start = (now - timedelta(minutes=minutes - 1)).replace(second=0, microsecond=0)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT date_trunc('minute', finished_at) AS minute,
                   count(*) FILTER (WHERE outcome = %s),
                   count(*) FILTER (WHERE outcome = ANY(%s))
            FROM {ExecutionAttempt._meta.db_table}
            WHERE finished_at >= %s
            GROUP BY minute
            """,
            [AttemptOutcome.SUCCESS, list(FAILED_OUTCOMES), start],
        )
        by_minute = {minute: (ok, failed) for minute, ok, failed in cursor.fetchall()}
    buckets = []
    for index in range(minutes):
        minute = start + timedelta(minutes=index)
        succeeded, failed = by_minute.get(minute, (0, 0))
        buckets.append(MinuteBucket(minute, succeeded, failed))
    return buckets


def executors_with_work() -> list[dict]:
    """Live executors (flow control's registry) with their slots and the executions dispatched
    to or running on each."""
    executors = live_executors()
    in_flight = dict.fromkeys((executor.worker_id for executor in executors), (0, 0))
    rows = (
        JobExecution.objects.filter(status__in=[S.DISPATCHED, S.RUNNING])
        .values("worker_id")
        .annotate(
            dispatched=Count("id", filter=Q(status=S.DISPATCHED)),
            running=Count("id", filter=Q(status=S.RUNNING)),
        )
        .order_by()
    )
    for row in rows:
        in_flight[row["worker_id"]] = (row["dispatched"], row["running"])
    return [
        {
            "worker_id": executor.worker_id,
            "slots": executor.slots,
            "queues": executor.queues,
            "partitions": executor.partitions,
            "heartbeat_at": executor.heartbeat_at,
            "started_at": executor.started_at,
            "dispatched": in_flight.get(executor.worker_id, (0, 0))[0],
            "running": in_flight.get(executor.worker_id, (0, 0))[1],
        }
        for executor in executors
    ]


def recent_failures(*, limit: int = 15) -> list[dict]:
    """The latest failed attempts, newest first, each saying what followed: a retry, the dead
    letter, or a cancel."""
    attempts = (
        ExecutionAttempt.objects.filter(outcome__in=FAILED_OUTCOMES, finished_at__isnull=False)
        .select_related("job__execution")
        .order_by("-finished_at")[:limit]
    )
    timeline = []
    for attempt in attempts:
        execution = attempt.job.execution
        last = attempt.attempt == execution.attempt_count
        if last and execution.status == S.FAILED:
            followed = "dead letter"
        elif last and execution.status == S.CANCELLED:
            followed = "cancelled"
        else:
            followed = "retry"
        timeline.append(
            {
                "job_id": attempt.job_id,
                "attempt": attempt.attempt,
                "outcome": attempt.outcome,
                "finished_at": attempt.finished_at,
                "error": attempt.error_message,
                "worker_id": attempt.worker_id,
                "followed": followed,
            }
        )
    return timeline


def database_health() -> dict:
    """Whether PostgreSQL answers, how fast, and its version."""
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        (version,) = cursor.fetchone()
    return {"ok": True, "version": version, "ms": round((time.monotonic() - started) * 1000, 1)}
