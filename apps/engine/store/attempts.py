"""The attempt ledger's rows (ExecutionAttempt): one per delivery of a job, keyed by its event
id. Opened and, on success, closed by the very statement that moves the execution
(store.executions): `open_many_step` and `close_step` are parts of those statements."""

from __future__ import annotations

import functools
import uuid

from django.db import connection

from jobweaver.core.db import (
    default_literal,
    update_rows,
    update_statement,
)
from jobweaver.engine.store import named
from jobweaver.executor.models import AttemptOutcome, ExecutionAttempt

_EVENT_ID = ExecutionAttempt._meta.get_field("event_id")
_WORKER_ID = ExecutionAttempt._meta.get_field("worker_id")

# The attempt's fields that `open_many_step` takes from the started execution and its job.
_OPENED_FROM_MOVED = {
    "job": "moved.job_id",
    "attempt": "moved.attempt_count",
    "trace_id": "j.trace_id",
    "started_at": "moved.started_at",
    "total_steps": "COALESCE(jsonb_array_length(j.instruction -> 'steps'), 0)",
}


def open_many_step() -> str:
    """The INSERT of the attempts of a batch of started deliveries, over `moved` (the started
    executions), their jobs `j` and `batch` (each delivery's event id and worker id, joined by
    the execution's new token): numbered by the new attempt count, started when it started."""
    return _open_many_sql()


# What `closed_many_step` takes from the batch `b` and the moved execution, beyond the opened
# attempt's: an attempt that ran before its start was written, recorded whole at its success.
_CLOSED_FROM_BATCH = {
    "finished_at": "moved.db_now",
    "outcome": f"'{AttemptOutcome.SUCCESS}'",
    "steps_completed": "COALESCE(b.steps_completed, 0)",
    "total_steps": "COALESCE(b.total_steps, jsonb_array_length(j.instruction -> 'steps'), 0)",
    "log_lines": "COALESCE(b.log_lines, '[]'::jsonb)",
    "result": "b.result",
}


def closed_many_step() -> str:
    """The INSERT of the SUCCESS attempts of a batch of deliveries started and completed in one
    statement, over `moved`, their jobs `j` and `batch` (each delivery's event id, worker id
    and report): numbered and timed as `open_many_step` does, finished when it completed."""
    return _open_many_sql(closed=True)


@functools.cache
def _open_many_sql(closed: bool = False) -> str:
    """Built once: every field's model default not taken from the rows is a literal of the
    text (the same for every attempt)."""
    meta, qn = ExecutionAttempt._meta, connection.ops.quote_name
    columns, expressions = [], []
    given = {_EVENT_ID: "b.event_id", _WORKER_ID: "b.worker_id"}
    from_rows = {**_OPENED_FROM_MOVED, **(_CLOSED_FROM_BATCH if closed else {})}
    for field in meta.concrete_fields:
        columns.append(qn(field.column))
        if field.name in from_rows:
            expressions.append(from_rows[field.name])
        elif field in given:
            expressions.append(given[field])
        else:
            expressions.append(default_literal(field))
    jobs = qn(meta.get_field("job").related_model._meta.db_table)
    return (
        f"INSERT INTO {qn(meta.db_table)} ({', '.join(columns)}) "
        f"SELECT {', '.join(expressions)} FROM moved JOIN {jobs} j ON j.id = moved.job_id "
        "JOIN batch b ON b.event_id = moved.current_event_id"
    )


def _running(event_id: uuid.UUID) -> dict:
    return {"event_id": event_id, "outcome": AttemptOutcome.RUNNING}


@named("UPDATE a RUNNING attempt to its outcome, finished on the database clock")
def attempt_close(*, event_id: uuid.UUID, fields: dict) -> bool:
    return update_rows(ExecutionAttempt, where=_running(event_id), values=fields) == 1


def close_step(*, event_id: uuid.UUID, fields: dict) -> tuple[str, list]:
    """`attempt_close` as a part of the statement that ends the execution (`moved`), finished
    at the same database time."""
    return update_statement(
        ExecutionAttempt,
        where=_running(event_id),
        values=fields,
        now_sql="moved.db_now",
        from_sql="FROM moved",
    )


@named("UPDATE a RUNNING attempt's progress (steps done, log lines, its own total)")
def attempt_progress(*, event_id: uuid.UUID, fields: dict) -> None:
    ExecutionAttempt.objects.filter(**_running(event_id)).update(**fields)
