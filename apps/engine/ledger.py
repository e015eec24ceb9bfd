"""The attempt ledger: an ExecutionAttempt row opens, progresses and closes here, and only here.

One row per delivery of a job to a worker, keyed by the delivery's event id (the idempotency key
of that delivery: a redelivered message finds its row and does not run again). The ledger knows
nothing of statuses or retries: the transitions decide (apps/engine/executions.py), the ledger
records, inside their transaction. An attempt is opened, and closed when it succeeds, by the
very statement that starts or completes its execution (store.executions). Only the progress is
written on its own: it is informative.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from jobweaver.core import metrics
from jobweaver.core.db import DatabaseNow, assert_in_transaction
from jobweaver.engine.store import attempts as attempt_rows
from jobweaver.executor.models import AttemptOutcome


@dataclass(frozen=True)
class AttemptReport:
    """What a worker reports of an attempt as it ends. Progress fields left None are kept as
    they are (a rescuer does not know them); a TASK attempt adds its return value (`result`,
    JSON) or its exception."""

    steps_completed: int | None = None
    log_lines: list[str] | None = None
    total_steps: int | None = None
    result: Any = None
    exception_type: str = ""
    traceback: str = ""

    def fields(self, *, outcome: AttemptOutcome, error: str) -> dict:
        """The columns an ending writes."""
        fields: dict = {"outcome": outcome, "error_message": error, "finished_at": DatabaseNow()}
        if self.result is not None:
            fields["result"] = self.result
        if self.exception_type:
            fields["exception_type"], fields["traceback"] = self.exception_type, self.traceback
        if self.total_steps is not None:
            fields["total_steps"] = self.total_steps
        if self.steps_completed is not None:
            fields["steps_completed"] = self.steps_completed
        if self.log_lines is not None:
            fields["log_lines"] = list(self.log_lines)
        return fields


NOTHING_REPORTED = AttemptReport()


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
    attempt_rows.attempt_progress(event_id=event_id, fields=fields)


def attempt_close(
    *,
    event_id: uuid.UUID,
    outcome: AttemptOutcome,
    error: str = "",
    report: AttemptReport = NOTHING_REPORTED,
) -> bool:
    """RUNNING → `outcome`, finished now (database clock), inside the transaction of the
    transition it records; False if the attempt was not RUNNING."""
    assert_in_transaction("attempt_close")
    closed = attempt_rows.attempt_close(
        event_id=event_id, fields=report.fields(outcome=outcome, error=error)
    )
    if closed:
        count_attempt(outcome)
    return closed


def count_attempt(outcome: AttemptOutcome) -> None:
    metrics.count_on_commit(metrics.ATTEMPTS.labels(str(outcome)).inc)
