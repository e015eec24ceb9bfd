"""The lifecycle's per-row statements on the executor's hot path, as fixed SQL.

Every attempt locks its execution twice (start, ending) and saves it twice. Through the ORM each
of those builds and compiles its SQL anew: a profile of the executor under load put a quarter
of its CPU there. Here the SQL is built once per process from the models' own field lists, rows
become model instances through `Model.from_db` (with each field's database converters, as the
ORM applies them), and values are prepared by each field's `get_db_prep_save`: the same rows,
the same instances, the same values as `select_for_update(...).first()` and
`save(update_fields=...)`, without the compile (apps/core/db.py does the same for inserts and
updates). The worker's start and completion (`execution_move`) read back only the values their
caller names, not instances.
"""

from __future__ import annotations

import re
import uuid
from functools import cache, lru_cache

from django.db import connection
from django.utils import timezone

from apps.core.db import update_rows
from apps.scheduler.models import ExecutionStatus, JobExecution


def _converters(fields) -> list[tuple]:
    return [
        (
            field,
            [
                *connection.ops.get_db_converters(field.get_col(field.model._meta.db_table)),
                *field.get_db_converters(connection),
            ],
        )
        for field in fields
    ]


def _job_model():
    return JobExecution._meta.get_field("job").related_model


@cache
def _execution_columns(alias: str) -> str:
    qn = connection.ops.quote_name
    return ", ".join(f"{alias}.{qn(f.column)}" for f in JobExecution._meta.concrete_fields)


@cache
def _columns(execution_alias: str) -> str:
    """The execution's columns, then its job's (joined as `j`), in model field order."""
    qn = connection.ops.quote_name
    executions, jobs = JobExecution._meta.concrete_fields, _job_model()._meta.concrete_fields
    return ", ".join(
        [f"{execution_alias}.{qn(f.column)}" for f in executions]
        + [f"j.{qn(f.column)}" for f in jobs]
    )


@cache
def _lock_statement() -> tuple[str, list, list]:
    qn = connection.ops.quote_name
    sql = (
        f"SELECT {_columns('e')}, clock_timestamp() "
        f"FROM {qn(JobExecution._meta.db_table)} e "
        f"JOIN {qn(_job_model()._meta.db_table)} j ON j.{qn('id')} = e.{qn('job_id')} "
        f"WHERE e.{qn('job_id')} = %s FOR UPDATE OF e"
    )
    return sql, *_row_converters()


@cache
def _row_converters() -> tuple[list, list]:
    return (
        _converters(JobExecution._meta.concrete_fields),
        _converters(_job_model()._meta.concrete_fields),
    )


@cache
def _attnames() -> tuple[list[str], list[str]]:
    return (
        [f.attname for f in JobExecution._meta.concrete_fields],
        [f.attname for f in _job_model()._meta.concrete_fields],
    )


def _values(row, converters) -> list:
    values = []
    for value, (field, functions) in zip(row, converters, strict=True):
        for function in functions:
            value = function(value, field, connection)
        values.append(value)
    return values


def execution_lock(job_id: uuid.UUID) -> JobExecution | None:
    """The job's execution with its job, locked FOR UPDATE (the job is not locked), annotated
    with the database clock as `db_now`; None when there is none."""
    sql, _, _ = _lock_statement()
    with connection.cursor() as cursor:
        cursor.execute(sql, [job_id])
        return _instance(cursor.fetchone())


def execution_move(
    *,
    job_id: uuid.UUID,
    event_id: uuid.UUID,
    sources: frozenset[str],
    target: str,
    assignments: str,
    params: list,
    steps: list[tuple[str, list]] = (),
    notify: str | None = None,
    reading: str = "moved.id",
) -> tuple | None:
    """Move the execution of `job_id` to `target` if `event_id` is its fencing token and its
    status is one of `sources`, in one statement: a conditional UPDATE (`assignments` in SQL,
    over the execution `e` and `clock.now`, the database clock read once), then `steps` — each
    a data-modifying SQL statement over `moved`, the execution's new row with that time as
    `db_now` — then NOTIFY `notify`. Returns the values of `reading`, SQL expressions over
    `moved` and its job `j`; None (nothing written) when the fence or the status refuses it.

    Only what the caller names is read back, as plain values: the start once read the
    execution's and its job's forty columns and built two model instances from them, about a
    fifth of the executor's own CPU per job, to use seven of them."""
    arguments = [*params, job_id, event_id]
    for _, step_params in steps:
        arguments.extend(step_params)
    sql = _move_statement(
        assignments,
        tuple(step for step, _ in steps),
        notify,
        reading,
        target,
        sources,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, arguments)
        row = cursor.fetchone()
    if row is not None and notify is not None:
        row = row[:-1]
    return row


@lru_cache(maxsize=64)
def _move_statement(
    assignments: str,
    steps: tuple[str, ...],
    notify: str | None,
    reading: str,
    target: str,
    sources: frozenset[str],
) -> str:
    """`execution_move`'s SQL. Built once per shape: the text is the same for every job (only
    the parameters differ), and building it anew was a tenth of the executor's CPU. The
    transition's statuses and the channel are written into the text, not passed: they are
    the same for every job of a shape, and adapting them (a list among them) per call was a
    twentieth of the executor's own CPU."""
    qn = connection.ops.quote_name
    table, jobs = qn(JobExecution._meta.db_table), qn(_job_model()._meta.db_table)
    statuses = ", ".join(status_literal(status) for status in sorted(sources))
    ctes = [
        "clock AS MATERIALIZED (SELECT clock_timestamp() AS now)",
        f"moved AS (UPDATE {table} e SET status = {status_literal(target)}, "
        f"version = e.version + 1, updated_at = clock.now, {assignments} FROM clock "
        f"WHERE e.job_id = %s AND e.current_event_id = %s AND e.status IN ({statuses}) "
        # Named columns, not e.*: a prepared statement's result must not change shape when a
        # migration adds a column while this process runs.
        f"RETURNING {_execution_columns('e')}, clock.now AS db_now)",
    ]
    ctes += [f"step{index} AS ({step})" for index, step in enumerate(steps)]
    if notify is not None and not _CHANNEL.fullmatch(notify):
        raise ValueError(f"not a channel name: {notify!r}")
    notification = f", pg_notify('{notify}', '')" if notify is not None else ""
    return (
        f"WITH {', '.join(ctes)} SELECT {reading}{notification} "
        f"FROM moved JOIN {jobs} j ON j.id = moved.job_id"
    )


_CHANNEL = re.compile(r"[a-z_][a-z0-9_]*")


def status_literal(status: str) -> str:
    """An execution status as an SQL literal: only the enum's own values, never input."""
    return f"'{ExecutionStatus(status).value}'"


def _instance(row) -> JobExecution | None:
    if row is None:
        return None
    execution_converters, job_converters = _row_converters()
    split = len(execution_converters)
    execution_names, job_names = _attnames()
    execution = JobExecution.from_db(
        connection.alias, execution_names, _values(row[:split], execution_converters)
    )
    execution.job = _job_model().from_db(
        connection.alias, job_names, _values(row[split:-1], job_converters)
    )
    execution.db_now = row[-1]
    return execution


def execution_save(execution: JobExecution, field_names: list[str]) -> None:
    """UPDATE these fields of a locked execution (and `updated_at`, set now, like auto_now)."""
    execution.updated_at = timezone.now()
    names = dict.fromkeys([*field_names, "updated_at"])
    update_rows(
        JobExecution,
        where={"id": execution.pk},
        values={name: getattr(execution, name) for name in names},
    )


# --- the executions of a submitted batch ------------------------------------------------------

# What a new execution copies from its job: (field, the job's attribute, SQL array type).
_COPIED_FROM_JOB = (
    ("job", "id", "uuid[]"),
    ("priority", "priority", "int[]"),
    ("max_retries", "max_retries", "int[]"),
    ("queue_name", "queue_name", "text[]"),
    ("job_type", "job_type", "text[]"),
    ("concurrency_key", "concurrency_key", "text[]"),
    ("submitted_by", "submitted_by_id", "bigint[]"),
)


@cache
def _insert_pending_statement() -> tuple[str, list]:
    """`executions_insert`'s SQL, and the fields whose model defaults fill its other
    parameters, in order."""
    qn = connection.ops.quote_name
    copied = {name: index for index, (name, _, _) in enumerate(_COPIED_FROM_JOB)}
    columns, expressions, defaults = [], [], []
    for field in JobExecution._meta.concrete_fields:
        columns.append(qn(field.column))
        if field.name in copied:
            expressions.append(f"b.c{copied[field.name]}")
        elif field.name == "id":
            expressions.append("gen_random_uuid()")
        elif field.name == "next_run_at":
            expressions.append("COALESCE(b.run_at, clock_timestamp())")  # due now, or runAt
        elif field.name == "updated_at":
            expressions.append("clock_timestamp()")
        else:
            expressions.append(f"%s::{field.db_type(connection)}")
            defaults.append(field)
    arrays = ", ".join(f"%s::{sql_type}" for _, _, sql_type in _COPIED_FROM_JOB)
    names = ", ".join(f"c{index}" for index in range(len(_COPIED_FROM_JOB)))
    sql = (
        f"INSERT INTO {qn(JobExecution._meta.db_table)} AS e ({', '.join(columns)}) "
        f"SELECT {', '.join(expressions)} "
        f"FROM unnest({arrays}, %s::timestamptz[]) AS b({names}, run_at) "
        f"RETURNING {_execution_columns('e')}"
    )
    return sql, defaults


def executions_insert(jobs: list) -> list[JobExecution]:
    """The PENDING executions of newly inserted jobs, in the jobs' order: one INSERT … SELECT
    over arrays of the jobs' values, due at each job's `run_at` or now (database clock).

    A bulk_create of a thousand executions built and parsed a statement of twenty thousand
    placeholders (and compiled the due-time expression once per row): two thirds of the web
    process's Python time under `make bench`. This statement has twenty parameters, whatever the
    batch's size."""
    sql, defaults = _insert_pending_statement()
    params = [field.get_db_prep_save(field.get_default(), connection) for field in defaults]
    params += [[getattr(job, attribute) for job in jobs] for _, attribute, _ in _COPIED_FROM_JOB]
    params.append([job.run_at for job in jobs])
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    converters, _ = _row_converters()
    names, _ = _attnames()
    by_job = {}
    for row in rows:
        execution = JobExecution.from_db(connection.alias, names, _values(row, converters))
        by_job[execution.job_id] = execution
    return [by_job[job.id] for job in jobs]
