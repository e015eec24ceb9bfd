"""The lifecycle's two per-row statements on the executor's hot path, as fixed SQL.

Every attempt locks its execution twice (start, ending) and saves it twice. Through the ORM each
of those builds and compiles its SQL anew: a profile of the executor under load put a quarter
of its CPU there. Here the SQL is built once per process from the models' own field lists, rows
become model instances through `Model.from_db` (with each field's database converters, as the
ORM applies them), and values are prepared by each field's `get_db_prep_save`: the same rows,
the same instances, the same values as `select_for_update(...).first()` and
`save(update_fields=...)`, without the compile (apps/core/db.py does the same for inserts and
updates).
"""

from __future__ import annotations

import uuid
from functools import cache

from django.db import connection
from django.utils import timezone

from apps.core.db import update_rows
from apps.scheduler.models import JobExecution


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


@cache
def _lock_statement() -> tuple[str, list, list]:
    job_model = JobExecution._meta.get_field("job").related_model
    executions, jobs = JobExecution._meta.concrete_fields, job_model._meta.concrete_fields
    qn = connection.ops.quote_name
    columns = [f"e.{qn(f.column)}" for f in executions] + [f"j.{qn(f.column)}" for f in jobs]
    sql = (
        f"SELECT {', '.join(columns)}, clock_timestamp() "
        f"FROM {qn(JobExecution._meta.db_table)} e "
        f"JOIN {qn(job_model._meta.db_table)} j ON j.{qn('id')} = e.{qn('job_id')} "
        f"WHERE e.{qn('job_id')} = %s FOR UPDATE OF e"
    )
    return sql, _converters(executions), _converters(jobs)


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
    sql, execution_converters, job_converters = _lock_statement()
    with connection.cursor() as cursor:
        cursor.execute(sql, [job_id])
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(execution_converters)
    execution = JobExecution.from_db(
        connection.alias,
        [field.attname for field, _ in execution_converters],
        _values(row[:split], execution_converters),
    )
    job_model = JobExecution._meta.get_field("job").related_model
    execution.job = job_model.from_db(
        connection.alias,
        [field.attname for field, _ in job_converters],
        _values(row[split:-1], job_converters),
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
