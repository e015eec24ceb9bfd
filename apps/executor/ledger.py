"""The attempt ledger: ExecutionAttempt rows open, progress and close here, and only here.

One row per delivery of a job to a worker, keyed by the delivery's event id (the idempotency key
of that delivery: a redelivered message finds its row and does not run again). The ledger knows
nothing of statuses or retries: the lifecycle decides, the ledger records. Every function runs
inside the caller's transaction, next to the lifecycle transition it records, except
`attempt_progress`, which is informative and written on its own.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from apps.core import metrics
from apps.core.db import DatabaseNow, assert_in_transaction, insert_row, update_rows
from apps.executor.models import AttemptOutcome, ExecutionAttempt


def attempt_exists(*, event_id: uuid.UUID) -> bool:
    return ExecutionAttempt.objects.filter(event_id=event_id).exists()


def attempt_open(
    *,
    event_id: uuid.UUID,
    job_id: uuid.UUID,
    attempt: int,
    trace_id: str,
    worker_id: str,
    started_at: datetime,
    total_steps: int,
) -> ExecutionAttempt:
    assert_in_transaction("attempt_open")
    opened = ExecutionAttempt(
        event_id=event_id,
        job_id=job_id,
        attempt=attempt,
        trace_id=trace_id,
        worker_id=worker_id,
        started_at=started_at,
        total_steps=total_steps,
    )
    insert_row(opened)  # the hot path: no SQL compile (apps/core/db.py)
    return opened


def attempt_progress(
    *,
    event_id: uuid.UUID,
    steps_completed: int,
    log_lines: list[str],
    total_steps: int | None = None,
) -> None:
    """`total_steps`: a TASK attempt's own total, reported with its progress."""
    fields: dict = {"steps_completed": steps_completed, "log_lines": list(log_lines)}
    if total_steps is not None:
        fields["total_steps"] = total_steps
    ExecutionAttempt.objects.filter(event_id=event_id, outcome=AttemptOutcome.RUNNING).update(
        **fields
    )


def attempt_close(
    *,
    event_id: uuid.UUID,
    outcome: AttemptOutcome,
    error: str = "",
    steps_completed: int | None = None,
    log_lines: list[str] | None = None,
    total_steps: int | None = None,
    result: Any = None,
    exception_type: str = "",
    traceback: str = "",
) -> bool:
    """RUNNING → `outcome`, finished now (database clock); False if the attempt was not
    RUNNING. Progress fields are left as they are when not given (a rescuer does not know).
    A TASK attempt also records its return value (`result`, JSON) or its exception."""
    assert_in_transaction("attempt_close")
    fields: dict = {"outcome": outcome, "error_message": error, "finished_at": DatabaseNow()}
    if result is not None:
        fields["result"] = result
    if exception_type:
        fields["exception_type"], fields["traceback"] = exception_type, traceback
    if total_steps is not None:
        fields["total_steps"] = total_steps
    if steps_completed is not None:
        fields["steps_completed"] = steps_completed
    if log_lines is not None:
        fields["log_lines"] = list(log_lines)
    running = {"event_id": event_id, "outcome": AttemptOutcome.RUNNING}
    closed = update_rows(ExecutionAttempt, where=running, values=fields) == 1
    if closed:
        metrics.count_on_commit(metrics.ATTEMPTS.labels(str(outcome)).inc)
    return closed
