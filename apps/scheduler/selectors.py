"""Reads of the dispatch controls: pauses and concurrency limits, and their one outside shape
(camelCase, times in ISO-8601 UTC) shared by the API, the command line and the dashboard; and
which queues have waiting work that no live executor serves (ARCHITECTURE §15)."""

from __future__ import annotations

from django.db import connection

from jobweaver.core.timeutil import iso
from jobweaver.scheduler.flow import live_executors
from jobweaver.scheduler.models import (
    ConcurrencyLimit,
    ExecutionStatus,
    JobExecution,
    Pause,
    status_literal,
)


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
        "updatedAt": iso(limit.updated_at),
    }
