"""Database helpers shared by the apps: riding out short outages (a PostgreSQL restart, a
failover) in worker code, the database clock, batched draining, transaction guards."""

from __future__ import annotations

import functools
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from datetime import datetime, timedelta
from typing import TypeVar

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connection, connections
from django.db.models import NOT_PROVIDED, DateTimeField, Field, Func
from django.db.models.expressions import DatabaseDefault
from psycopg import errors as pg_errors
from psycopg.sql import Literal

from jobweaver.core.threads import on_each_thread

logger = logging.getLogger(__name__)

T = TypeVar("T")
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)


def lock_timed_out(exc: BaseException) -> bool:
    """Whether `exc` is a statement that waited out JOBWEAVER_DB_LOCK_TIMEOUT_SECONDS for a lock
    held by concurrent work: its transaction rolled back, and trying again later is the
    answer (the API's 429, the commands' exit 1, a bulk action's "busy" skip)."""
    return isinstance(exc, OperationalError) and isinstance(
        exc.__cause__, pg_errors.LockNotAvailable
    )


def statement_cancelled(exc: BaseException) -> bool:
    """Whether `exc` is a statement the database cancelled: it ran past
    JOBWEAVER_DB_STATEMENT_TIMEOUT_SECONDS, or an operator cancelled it. Its transaction rolled
    back."""
    return isinstance(exc, OperationalError) and isinstance(exc.__cause__, pg_errors.QueryCanceled)


def retry_while_database_unavailable(fn: Callable[[], T], *, what: str, timeout: float) -> T:
    """Call `fn` (a whole transaction: it must be safe to run again after a rollback) until it
    gets through, for up to `timeout` seconds, reconnecting between tries with backoff."""
    deadline = time.monotonic() + timeout
    delay = 0.1
    while True:
        try:
            return fn()
        except DATABASE_UNAVAILABLE as exc:
            if time.monotonic() + delay > deadline:
                raise
            logger.warning("%s: database unavailable (%s); retrying in %.1f s", what, exc, delay)
            connection.close()  # this thread's broken connection; the next query reconnects
            time.sleep(delay)
            delay = min(delay * 2, 2.0)


class DatabaseNow(Func):
    """`clock_timestamp()`: the database server's clock, the one clock of the system.

    Leases, due times and liveness are computed and compared in SQL with this expression, never
    with a process's wall clock, so a worker whose clock is off behaves like one that is not.
    (`now()` would be the start of the transaction; this is the time the row is evaluated.)
    """

    template = "clock_timestamp()"
    output_field = DateTimeField()


def listen_connection() -> psycopg.Connection:
    """A connection of its own to the default database, in autocommit, for LISTEN (Django's
    connections are per thread and may sit in a transaction, where notifications wait)."""
    db = settings.DATABASES[DEFAULT_DB_ALIAS]
    return psycopg.connect(
        dbname=db["NAME"],
        user=db.get("USER") or None,
        password=db.get("PASSWORD") or None,
        host=db.get("HOST") or None,
        port=db.get("PORT") or None,
        autocommit=True,
    )


# A statement's eighth run on a connection is the first that may run on its generic plan (no
# planning): psycopg prepares it at its second run (prepare_threshold 1), and PostgreSQL plans a
# prepared statement for its parameters at its first five runs before it weighs the generic
# plan. Until then every run of it is planned, often for longer than it runs (bench/NOTES.md).
WARM_UP_RUNS = 8


def warm_connection(statements: Sequence[Callable[[], object]] = ()) -> None:
    """Open this thread's database connection and have its new PostgreSQL session read the
    catalog entries of every table (and their indexes) of the installed models, in one
    statement that reads no row; then run each of `statements` (a process's hot statements)
    WARM_UP_RUNS times. A thread's first requests otherwise paid for all of it: the
    connection, the catalog reads on each table's first use, a plan at every run (bench/NOTES.md).

    Each of `statements` must change nothing and commit: psycopg forgets every statement it
    prepared on a connection at a ROLLBACK."""
    with connection.cursor() as cursor:
        cursor.execute(_warm_up_statement())
    for _ in range(WARM_UP_RUNS):
        for statement in statements:
            statement()


def warm_pool_connections(
    pool: Executor,
    threads: int,
    timeout: float,
    statements: Sequence[Callable[[], object]] = (),
) -> list[BaseException]:
    """`warm_connection(statements)` on each of the `threads` threads of `pool` (started now if
    they were not), waiting at most `timeout` seconds; returns the errors (the database away:
    the first tasks connect as they would have)."""
    return on_each_thread(pool, threads, lambda: warm_connection(statements), timeout)


@functools.cache
def _warm_up_statement() -> str:
    from django.apps import apps

    tables = sorted({model._meta.db_table for model in apps.get_models(include_auto_created=True)})
    qn = connection.ops.quote_name
    return " UNION ALL ".join(f"(SELECT 1 FROM {qn(table)} LIMIT 0)" for table in tables)


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


def drain_in_batches(claim_batch: Callable[[], list[T]], batch_size: int) -> list[T]:
    """Run `claim_batch` (one transaction each) until a batch comes back short; all results."""
    claimed: list[T] = []
    while True:
        batch = claim_batch()
        claimed.extend(batch)
        if len(batch) < batch_size:
            return claimed


def assert_in_transaction(what: str) -> None:
    """Guard of functions that must run inside their caller's transaction (they take row locks
    whose effect must commit together with the caller's other writes)."""
    if not connection.in_atomic_block:
        raise RuntimeError(f"{what} must run inside the caller's transaction")


# --- statements of the hot path, without the ORM's per-call SQL compilation ----------------------
#
# Each job's start and ending write a handful of rows. Through the ORM every one of those
# statements is built and compiled anew on every call, the same SQL each time (bench/NOTES.md).
# These two helpers write the same rows with the same values — each field prepares its own
# value (`pre_save`, `get_db_prep_save`), as `save()` and `update()` do — from SQL that is
# either cached per model or a few joined strings. No signals are sent (the ORM's
# `update()` sends none either; no receiver listens for these models' saves).


@functools.cache
def _fields_with_database_defaults(model) -> tuple:
    return tuple(f for f in model._meta.local_concrete_fields if f.has_db_default())


@functools.cache
def _insert_statement(model, database_defaults: tuple[str, ...]) -> tuple[str, tuple, tuple]:
    """The INSERT of `model` where the fields named in `database_defaults` take their column's
    default (`db_default`, e.g. the database clock) and come back through RETURNING."""
    meta = model._meta
    qn = connection.ops.quote_name
    fields = tuple(f for f in meta.local_concrete_fields if not f.generated)
    valued = tuple(f for f in fields if f.name not in database_defaults)
    returned = tuple(f for f in fields if f.name in database_defaults)
    values = ["DEFAULT" if f in returned else "%s" for f in fields]
    sql = (
        f"INSERT INTO {qn(meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) "
        f"VALUES ({', '.join(values)})"
    )
    if returned:
        sql += f" RETURNING {', '.join(qn(f.column) for f in returned)}"
    return sql, valued, returned


def this_connection():
    """This thread's default database connection itself, for preparing many values.

    `django.db.connection` is a proxy that finds the thread's connection on every attribute
    read (an asgiref Local lookup), and a field's `get_db_prep_save` reads `connection.ops`
    and `.features` for each value, eighteen per job on the executor's path: one lookup per
    statement instead of one per value (bench/NOTES.md). Never keep the result beyond the
    current call."""
    return connections[DEFAULT_DB_ALIAS]


def default_literal(field) -> str:
    """A model field's default, prepared for the database, as an SQL literal of its column
    type: for statements built once whose defaults are the same on every call. Only constants
    and empty containers (`default=list`) qualify; a per-call default (uuid4, now) raises."""
    default = field.default
    if default is not NOT_PROVIDED and callable(default) and default not in (list, dict):
        raise ValueError(f"{field.name}'s default is not a constant")
    db = this_connection()
    db.ensure_connection()
    value = field.get_db_prep_save(field.get_default(), db)
    return f"{Literal(value).as_string(db.connection)}::{field.db_type(db)}"


def insert_row(instance) -> None:
    """INSERT a new model instance whose primary key is set by a Python default (UUIDs here):
    `instance.save(force_insert=True)` without the compile. Fields left to their database
    default (`db_default`) get it and are read back, as `save()` does."""
    assert instance.pk is not None, "insert_row needs a primary key set in Python"
    database_defaults = tuple(
        f.name
        for f in _fields_with_database_defaults(type(instance))
        if isinstance(getattr(instance, f.attname), DatabaseDefault)
    )
    sql, fields, returned = _insert_statement(type(instance), database_defaults)
    db = this_connection()
    params = [f.get_db_prep_save(f.pre_save(instance, True), db) for f in fields]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if returned:
            row = cursor.fetchone()
            for field, value in zip(returned, row, strict=True):
                setattr(instance, field.attname, value)  # as save() reads db_returning fields
    instance._state.adding, instance._state.db = False, connection.alias


_DEFAULT = object()


def new_instance(model, values: dict):
    """A new, unsaved instance of `model` from `values` by attname (`submitted_by_id`, not
    `submitted_by`), each other field at its default: built from positional values, as Django
    builds a row it loaded, for `insert_rows`. The keyword path looks up each field's
    default, related descriptor and property, most of a batch's Python work per new row
    (bench/NOTES.md)."""
    return model(
        *[
            value
            if (value := values.get(field.attname, _DEFAULT)) is not _DEFAULT
            else field.get_default()
            for field in model._meta.concrete_fields
        ]
    )


def insert_rows(instances: list) -> None:
    """INSERT new instances of one model, primary keys set by a Python default (UUIDs here):
    `bulk_create` without the compile, in one statement over one JSON document of the rows.

    A bulk_create compiled a batch's values one by one and psycopg dumped them as text arrays,
    escaping each quote of each instruction with a regular expression: work per value
    (bench/NOTES.md). This statement has one parameter whatever the batch's size. Values are
    each field's `pre_save` (auto_now timestamps set as save() sets them) as JSON: UUIDs and
    times as text, a JSONField's value as the JSON itself; PostgreSQL reads each back as its
    column's type."""
    if not instances:
        return
    model = type(instances[0])
    sql, _ = _insert_rows_statement(model)
    as_is, through_pre_save = _insert_rows_readers(model)
    rows = []
    for instance in instances:
        values = instance.__dict__
        row = {column: values[attname] for column, attname in as_is}
        for field in through_pre_save:
            row[field.column] = _json_value(field.pre_save(instance, True))
        rows.append(row)
    with connection.cursor() as cursor:
        cursor.execute(sql, [json.dumps(rows)])
    for instance in instances:
        instance._state.adding, instance._state.db = False, connection.alias


# Field types whose Python values are already what JSON carries (text, numbers, booleans, JSON).
_JSON_NATIVE_TYPES = frozenset(
    {
        "AutoField",
        "BigAutoField",
        "BigIntegerField",
        "BooleanField",
        "CharField",
        "FloatField",
        "IntegerField",
        "JSONField",
        "PositiveBigIntegerField",
        "PositiveIntegerField",
        "PositiveSmallIntegerField",
        "SmallAutoField",
        "SmallIntegerField",
        "TextField",
    }
)


@functools.cache
def _insert_rows_readers(model) -> tuple[tuple[tuple[str, str], ...], tuple]:
    """`insert_rows`' fields in two groups: (column, attname) of those whose value goes as it
    is (`pre_save` only reads the attribute, and JSON carries the type), and the fields that
    need their `pre_save` (auto_now) or a conversion (UUIDs, times): a call and a type test
    per value saved where the attribute is the value (bench/NOTES.md)."""
    _, fields = _insert_rows_statement(model)
    as_is, through_pre_save = [], []
    for field in fields:
        typed = field.target_field if field.is_relation else field
        plain_read = type(field).pre_save is Field.pre_save
        if plain_read and typed.get_internal_type() in _JSON_NATIVE_TYPES:
            as_is.append((field.column, field.attname))
        else:
            through_pre_save.append(field)
    return tuple(as_is), tuple(through_pre_save)


def _json_value(value):
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


@functools.cache
def _insert_rows_statement(model) -> tuple[str, tuple]:
    meta = model._meta
    db = this_connection()
    qn = connection.ops.quote_name
    fields = tuple(f for f in meta.local_concrete_fields if not f.generated)
    assert not any(f.has_db_default() for f in fields), "insert_rows sets every column itself"
    columns = ", ".join(qn(f.column) for f in fields)
    record = ", ".join(f"{qn(f.column)} {f.db_type(db)}" for f in fields)
    sql = (
        f"INSERT INTO {qn(meta.db_table)} ({columns}) "
        f"SELECT {columns} FROM jsonb_to_recordset(%s::jsonb) AS r({record})"
    )
    return sql, fields


def update_rows(model, *, where: dict, values: dict) -> int:
    """`model.objects.filter(**where).update(**values)` for plain equality filters; a value
    may be `DatabaseNow()`. Returns the number of rows updated."""
    sql, params = update_statement(model, where=where, values=values)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def update_statement(
    model, *, where: dict, values: dict, now_sql: str = "clock_timestamp()", from_sql: str = ""
) -> tuple[str, list]:
    """The SQL and parameters of `update_rows`; `DatabaseNow()` values become `now_sql`, and
    `from_sql` (e.g. "FROM moved") joins other rows in, for use inside a larger statement."""
    meta, db = model._meta, this_connection()
    params = [
        meta.get_field(name).get_db_prep_save(value, db)
        for name, value in values.items()
        if not isinstance(value, DatabaseNow)
    ]
    params += [
        meta.get_field(name).get_db_prep_value(value, db, prepared=False)
        for name, value in where.items()
    ]
    shape = tuple((name, isinstance(value, DatabaseNow)) for name, value in values.items())
    return _update_sql(model, shape, tuple(where), now_sql, from_sql), params


@functools.lru_cache(maxsize=256)
def _update_sql(
    model, values: tuple[tuple[str, bool], ...], where: tuple[str, ...], now_sql: str, from_sql: str
) -> str:
    """`update_statement`'s SQL for one shape (which fields, which of them set to the database
    clock): built once, as the hot path repeats the same few shapes for every job."""
    meta, qn = model._meta, connection.ops.quote_name
    table = qn(meta.db_table)
    assignments = [
        f"{qn(meta.get_field(name).column)} = {now_sql if is_now else '%s'}"
        for name, is_now in values
    ]
    conditions = [f"{table}.{qn(meta.get_field(name).column)} = %s" for name in where]
    where_sql = " AND ".join(conditions)
    return f"UPDATE {table} SET {', '.join(assignments)} {from_sql} WHERE {where_sql}"
