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


@functools.cache
def _open_many_sql() -> str:
    """Built once: every field's model default not taken from the rows is a literal of the
    text (the same for every attempt)."""
    meta, qn = ExecutionAttempt._meta, connection.ops.quote_name
    columns, expressions = [], []
    given = {_EVENT_ID: "b.event_id", _WORKER_ID: "b.worker_id"}
    for field in meta.concrete_fields:
        columns.append(qn(field.column))
        if field.name in _OPENED_FROM_MOVED:
            expressions.append(_OPENED_FROM_MOVED[field.name])
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
