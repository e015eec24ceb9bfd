"""The attempt ledger: ExecutionAttempt rows open, progress and close here, and only here.

One row per delivery of a job to a worker, keyed by the delivery's event id (the idempotency key
of that delivery: a redelivered message finds its row and does not run again). The ledger knows
nothing of statuses or retries: the lifecycle decides, the ledger records. Every function runs
inside the caller's transaction, next to the lifecycle transition it records, except
`attempt_progress`, which is informative and written on its own. An attempt is opened, and
closed when it succeeds, by the very statement that starts or completes its execution
(lifecycle.execution_start, execution_complete): `attempt_open_step` and `attempt_close_step`
are those statements' parts, SQL over `moved`, the execution's new row.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from django.db import connection

from apps.core import metrics
from apps.core.db import (
    DatabaseNow,
    assert_in_transaction,
    default_literal,
    this_connection,
    update_rows,
    update_statement,
)
from apps.executor.models import AttemptOutcome, ExecutionAttempt


def attempt_exists(*, event_id: uuid.UUID) -> bool:
    return ExecutionAttempt.objects.filter(event_id=event_id).exists()


def attempt_open_step(*, event_id: uuid.UUID, worker_id: str) -> tuple[str, list]:
    """Open the attempt of a delivery, as a step of the statement that starts its execution
    (lifecycle.execution_start): numbered by the execution's new attempt count, started when it
    started, with its job's trace id and step count; every other field its model default."""
    db = this_connection()
    return _open_step_statement(), [
        _EVENT_ID.get_db_prep_save(event_id, db),
        _WORKER_ID.get_db_prep_save(worker_id, db),
    ]


_EVENT_ID = ExecutionAttempt._meta.get_field("event_id")
_WORKER_ID = ExecutionAttempt._meta.get_field("worker_id")

# The attempt's fields that `attempt_open_step` takes from the started execution and its job.
_OPENED_FROM_MOVED = {
    "job": "moved.job_id",
    "attempt": "moved.attempt_count",
    "trace_id": "j.trace_id",
    "started_at": "moved.started_at",
    "total_steps": "COALESCE(jsonb_array_length(j.instruction -> 'steps'), 0)",
}


@functools.cache
def _open_step_statement() -> str:
    """`attempt_open_step`'s SQL, built once: its parameters are the event id and the worker
    id, in column order; every other field's model default is written into the text as a
    literal (the same for every attempt: adapting them per call was a tenth of the executor's
    own CPU)."""
    meta, qn = ExecutionAttempt._meta, connection.ops.quote_name
    columns, expressions = [], []
    for field in meta.concrete_fields:
        columns.append(qn(field.column))
        if field.name in _OPENED_FROM_MOVED:
            expressions.append(_OPENED_FROM_MOVED[field.name])
        elif field in (_EVENT_ID, _WORKER_ID):
            expressions.append("%s")
        else:
            expressions.append(default_literal(field))
    jobs = qn(meta.get_field("job").related_model._meta.db_table)
    return (
        f"INSERT INTO {qn(meta.db_table)} ({', '.join(columns)}) "
        f"SELECT {', '.join(expressions)} FROM moved JOIN {jobs} j ON j.id = moved.job_id"
    )


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


def _closing(
    *,
    outcome: AttemptOutcome,
    error: str = "",
    steps_completed: int | None = None,
    log_lines: list[str] | None = None,
    total_steps: int | None = None,
    result: Any = None,
    exception_type: str = "",
    traceback: str = "",
) -> dict:
    """The fields an ending writes. Progress fields are left as they are when not given (a
    rescuer does not know); a TASK attempt also records its return value (`result`, JSON) or
    its exception."""
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
    return fields


def attempt_close(*, event_id: uuid.UUID, outcome: AttemptOutcome, **ending: Any) -> bool:
    """RUNNING → `outcome`, finished now (database clock); False if the attempt was not
    RUNNING. `ending`: the error, progress and task fields of `_closing`."""
    assert_in_transaction("attempt_close")
    fields = _closing(outcome=outcome, **ending)
    running = {"event_id": event_id, "outcome": AttemptOutcome.RUNNING}
    closed = update_rows(ExecutionAttempt, where=running, values=fields) == 1
    if closed:
        metrics.count_on_commit(metrics.ATTEMPTS.labels(str(outcome)).inc)
    return closed


def attempt_close_step(
    *, event_id: uuid.UUID, outcome: AttemptOutcome, **ending: Any
) -> tuple[str, list]:
    """`attempt_close` as a step of the statement that ends the execution, finished at the
    same database time. The caller counts the metric once the statement went through."""
    running = {"event_id": event_id, "outcome": AttemptOutcome.RUNNING}
    return update_statement(
        ExecutionAttempt,
        where=running,
        values=_closing(outcome=outcome, **ending),
        now_sql="moved.db_now",
        from_sql="FROM moved",
    )
