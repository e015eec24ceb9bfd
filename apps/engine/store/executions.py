"""An execution's row: lock, save, insert, and the statements that move it.

Every statement that writes a status takes the transition it makes (apps/engine/transitions.py)
and writes what the transition implies through `_moving`: the to-state, `version + 1`,
`updated_at`, and a NOTIFY of the dispatcher when it frees a credit. The from-states and, for a
fenced move, the fencing token are the statement's WHERE: a conditional UPDATE waits for a row
lock and then evaluates its WHERE again on the committed row, so it is as safe as
lock-then-check.

Rows become model instances through `Model.from_db` with each field's converters, and values
are prepared by each field's `get_db_prep_save`: the same rows and values as the ORM's, from
SQL built once per process rather than compiled per call (the hot path repeats it per job).
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timedelta
from functools import cache, lru_cache

from django.db import connection
from django.utils import timezone

from jobweaver.core.db import DatabaseNow, update_rows
from jobweaver.engine.events import JOB_COMPLETED, WORKFLOW_FINISHED
from jobweaver.engine.store import attempts, named
from jobweaver.engine.store import events as event_rows
from jobweaver.engine.store import workflows as workflow_rows
from jobweaver.engine.transitions import TRANSITIONS, WORKFLOW_TRANSITIONS, Transition
from jobweaver.executor.models import AttemptOutcome
from jobweaver.scheduler.models import ExecutionStatus, JobExecution, status_literal
from jobweaver.workflows.models import Node, WorkflowStatus

DISPATCH_CHANNEL = "jobweaver_dispatch"
# A pause or a resume committed: executors holding accepted deliveries read the pauses again.
PAUSE_CHANNEL = "jobweaver_pause"
_CHANNEL = re.compile(r"[a-z_][a-z0-9_]*")
assert _CHANNEL.fullmatch(DISPATCH_CHANNEL) and _CHANNEL.fullmatch(PAUSE_CHANNEL)


def _statuses(statuses) -> str:
    return ", ".join(status_literal(status) for status in sorted(statuses))


def _moving(transition: Transition, now: str) -> str:
    """The assignments every move writes, from its transition: status, version, updated_at."""
    return (
        f"status = {status_literal(transition.target)}, version = e.version + 1, updated_at = {now}"
    )


def _notify(transition: Transition, *, many: bool = False) -> str:
    """The NOTIFY a transition that frees a credit sends with its statement (transactional).
    A statement of `many` rows says how many credits it freed: its payload is the row count
    (the same text on every row, so PostgreSQL sends it once), which the dispatcher's wake-up
    adds up (apps/scheduler/wakeup.py); an empty payload is one credit."""
    if not transition.frees_a_credit:
        return ""
    payload = "(count(*) OVER ())::text" if many else "''"
    return f", pg_notify('{DISPATCH_CHANNEL}', {payload})"


@named("NOTIFY the dispatcher once the transaction commits (a credit freed, an executor joined)")
def notify_dispatch() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, '')", [DISPATCH_CHANNEL])


@named("NOTIFY the executors once the transaction commits (a pause or a resume)")
def notify_pauses() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, '')", [PAUSE_CHANNEL])


# --- rows as model instances ----------------------------------------------------------------


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
    # Named columns, not e.*: a prepared statement's result must not change shape when a
    # migration adds a column while this process runs.
    qn = connection.ops.quote_name
    return ", ".join(f"{alias}.{qn(f.column)}" for f in JobExecution._meta.concrete_fields)


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


# --- one locked row ---------------------------------------------------------------------------


@cache
def _lock_sql() -> str:
    qn = connection.ops.quote_name
    jobs = _job_model()._meta.concrete_fields
    columns = ", ".join([_execution_columns("e")] + [f"j.{qn(f.column)}" for f in jobs])
    return (
        f"SELECT {columns}, clock_timestamp() "
        f"FROM {qn(JobExecution._meta.db_table)} e "
        f"JOIN {qn(_job_model()._meta.db_table)} j ON j.{qn('id')} = e.{qn('job_id')} "
        f"WHERE e.{qn('job_id')} = %s FOR UPDATE OF e"
    )


@named("SELECT … FOR UPDATE a job's execution with its job and the database clock (db_now)")
def execution_lock(job_id: uuid.UUID) -> JobExecution | None:
    with connection.cursor() as cursor:
        cursor.execute(_lock_sql(), [job_id])
        return _instance(cursor.fetchone())


@named("UPDATE the named fields of a locked execution, and updated_at (like auto_now)")
def execution_save(execution: JobExecution, field_names: list[str]) -> None:
    execution.updated_at = timezone.now()
    names = dict.fromkeys([*field_names, "updated_at"])
    update_rows(
        JobExecution,
        where={"id": execution.pk},
        values={name: getattr(execution, name) for name in names},
    )


@named("SELECT … FOR UPDATE SKIP LOCKED executions in flight whose lease expired, oldest first")
def executions_lock_expired(
    *, sources, limit: int, expired_by: datetime | None, job_ids: list[uuid.UUID] | None
) -> list[JobExecution]:
    expired = (
        JobExecution.objects.select_for_update(skip_locked=True, of=("self",))
        .select_related("job")
        .annotate(db_now=DatabaseNow())
        .filter(
            status__in=sorted(sources),
            lease_expires_at__lt=expired_by if expired_by is not None else DatabaseNow(),
        )
    )
    if job_ids is not None:
        expired = expired.filter(job_id__in=job_ids)
    return list(expired.order_by("lease_expires_at")[:limit])


# --- the executions of submitted jobs ---------------------------------------------------------

# What a new execution copies from its job: (field, the job's attribute, SQL type); the
# concurrency key (attribute None) is the job's scoped (apps/engine/keys.py), given apart.
_COPIED_FROM_JOB = (
    ("job", "id", "uuid"),
    ("priority", "priority", "int"),
    ("max_retries", "max_retries", "int"),
    ("queue_name", "queue_name", "text"),
    ("job_type", "job_type", "text"),
    ("concurrency_key", None, "text"),
    ("submitted_by", "submitted_by_id", "bigint"),
)


# The JSON document's names for them: c0, c1, … in that order.
_COPIED_NAMES = tuple(
    (f"c{index}", attribute) for index, (_, attribute, _) in enumerate(_COPIED_FROM_JOB)
)


def _json_scalar(value):
    return str(value) if isinstance(value, uuid.UUID) else value


@cache
def _insert_pending_sql() -> tuple[str, list]:
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
        elif field.name == "status":  # a workflow's job with dependencies waits (§16)
            waiting, pending = (
                status_literal(ExecutionStatus.WAITING),
                status_literal(ExecutionStatus.PENDING),
            )
            expressions.append(f"CASE WHEN b.waits THEN {waiting} ELSE {pending} END")
        else:
            expressions.append(f"%s::{field.db_type(connection)}")
            defaults.append(field)
    record = ", ".join(
        f"c{index} {sql_type}" for index, (*_, sql_type) in enumerate(_COPIED_FROM_JOB)
    )
    sql = (
        f"INSERT INTO {qn(JobExecution._meta.db_table)} AS e ({', '.join(columns)}) "
        f"SELECT {', '.join(expressions)} "
        f"FROM jsonb_to_recordset(%s::jsonb) AS b({record}, run_at timestamptz, waits boolean) "
        f"RETURNING {_execution_columns('e')}"
    )
    return sql, defaults


@named(
    "INSERT … SELECT the PENDING (or WAITING) executions of new jobs from a JSON document of rows"
)
def executions_insert(
    jobs: list, concurrency_keys: list[str | None], waiting: list[uuid.UUID] = ()
) -> list[JobExecution]:
    """In the jobs' order, due at each job's `run_at` or now (database clock), WAITING for the
    jobs in `waiting` (a workflow's jobs with dependencies), each with its key of
    `concurrency_keys`. The rows go as one JSON document whatever the batch's size: a list
    parameter per column cost psycopg a look at each list's items for their type, several
    times the work of dumping the document (bench/NOTES.md)."""
    sql, defaults = _insert_pending_sql()
    waits = set(waiting)
    document = []
    for job, key in zip(jobs, concurrency_keys, strict=True):
        row = {
            name: key if attribute is None else _json_scalar(getattr(job, attribute))
            for name, attribute in _COPIED_NAMES
        }
        row["run_at"] = None if job.run_at is None else job.run_at.isoformat()
        row["waits"] = job.id in waits
        document.append(row)
    params = [field.get_db_prep_save(field.get_default(), connection) for field in defaults]
    params.append(json.dumps(document))
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


# --- fenced moves: one statement for the holder of the token ----------------------------------


def _fenced(
    transition: Transition,
    *,
    job_id: uuid.UUID,
    event_id: uuid.UUID,
    assignments: str,
    params: list,
    steps: tuple[tuple[str, list], ...] = (),
    reading: str = "moved.id",
    also_where: str = "",
    where_params: tuple = (),
) -> tuple | None:
    """Move the execution of `job_id` along `transition` if `event_id` is its token and its
    status a from-state, in one statement: the conditional UPDATE (`assignments` over `e` and
    `clock.now`, the database clock read once), then `steps`, statements over `moved` (the new
    row, with that time as `db_now`), then the transition's NOTIFY. Returns `reading` (SQL
    over `moved` and its job `j`); None, nothing written, when the fence refuses it."""
    arguments = [*params, job_id, event_id, *where_params]
    for _, step_params in steps:
        arguments.extend(step_params)
    sql = _fenced_sql(
        transition.name, assignments, tuple(step for step, _ in steps), reading, also_where
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, arguments)
        row = cursor.fetchone()
    if row is not None and transition.frees_a_credit:
        row = row[:-1]
    return row


@lru_cache(maxsize=64)
def _fenced_sql(
    name: str, assignments: str, steps: tuple[str, ...], reading: str, also_where: str
) -> str:
    """Built once per shape: the text is the same for every job, only the parameters differ;
    the statuses and the channel are written in, not passed (the same for every job)."""
    transition = TRANSITIONS[name]
    qn = connection.ops.quote_name
    table, jobs = qn(JobExecution._meta.db_table), qn(_job_model()._meta.db_table)
    ctes = [
        "clock AS MATERIALIZED (SELECT clock_timestamp() AS now)",
        f"moved AS (UPDATE {table} e SET {_moving(transition, 'clock.now')}, {assignments} "
        f"FROM clock WHERE e.job_id = %s AND e.current_event_id = %s "
        f"AND e.status IN ({_statuses(transition.sources)}) {also_where} "
        f"RETURNING {_execution_columns('e')}, clock.now AS db_now)",
    ]
    ctes += [f"step{index} AS ({step})" for index, step in enumerate(steps)]
    return (
        f"WITH {', '.join(ctes)} SELECT {reading}{_notify(transition)} "
        f"FROM moved JOIN {jobs} j ON j.id = moved.job_id"
    )


# A batch statement's rows over executions `e` and the batch `b` (parameters: the job ids, then
# the from-states), written so that every plan, custom or generic, probes the unique job_id
# index per id: the ids again as an array, the token compared by a non-strict operator and the
# states tested inside a CASE, which the planner does not read to pick an index. A plan through
# a partial index of in-flight rows or live tokens read all of it, the entries earlier jobs left
# dead included: generic plans did with a plain status test, custom plans too (bench/NOTES.md).
_BATCH_ROWS = (
    "e.job_id = ANY(%s::uuid[]) AND e.job_id = b.job_id "
    "AND e.current_event_id IS NOT DISTINCT FROM b.event_id "
    "AND CASE WHEN e.status = ANY(%s::varchar[]) THEN true ELSE false END"
)


# A delivery an executor accepted (`executions_accept`) is started by that executor only
# (parameter: the executor's id): another that receives it too (a rebalance moved the
# partition) would run it a second time.
_NOT_ACCEPTED_BY_ANOTHER = "(NOT e.accepted OR e.worker_id = %s)"


# What a started execution tells its executor (executions.Started's fields), then the
# start's wait for the metric.
@cache
def _started_reading() -> str:
    node = connection.ops.quote_name(Node._meta.db_table)
    return (
        "moved.attempt_count, j.job_type, j.instruction, j.trace_id, j.traceparent, "
        "j.timeout_seconds, j.hard_timeout_seconds, "
        f"(SELECT n.workflow_id FROM {node} n WHERE n.job_id = moved.job_id), "
        "GREATEST(EXTRACT(EPOCH FROM moved.started_at - moved.dispatched_at), 0)"
    )


@named("UPDATE DISPATCHED → RUNNING for many tokens' holders and INSERT their attempts")
def executions_start(
    transition: Transition,
    *,
    deliveries: list[tuple[uuid.UUID, uuid.UUID, str]],
    executor_id: str,
    lease: timedelta,
    serves: list[str],
    ran: dict[tuple[uuid.UUID, uuid.UUID], float] | None = None,
) -> dict[tuple[uuid.UUID, uuid.UUID], tuple]:
    """DISPATCHED → RUNNING for many (job id, event id, attempt's worker id) at once, their
    attempts opened, one statement, each row fenced by its own token, each started `ran`
    seconds before the statement (an attempt that ran before its start was written; none: 0),
    on the database clock: {(job id, event id):
    (attempt,
    job_type, instruction, trace_id, traceparent, timeout_seconds, hard_timeout_seconds,
    workflow_id, waited)} for the ones started; a stale token or an unserved queue leaves its
    row as it was."""
    assert not transition.events, "a start writes no events"
    ran = ran or {}
    document = [
        {
            "job_id": str(job_id),
            "event_id": str(event_id),
            "worker_id": worker_id,
            "ran": ran.get((job_id, event_id), 0.0),
        }
        for job_id, event_id, worker_id in deliveries
    ]
    job_ids = [job_id for job_id, _, _ in deliveries]
    sql = _start_many_sql(transition.name)
    return _by_delivery(sql, transition, document, job_ids, executor_id, lease, serves)


def _by_delivery(
    sql: str,
    transition: Transition,
    document: list,
    job_ids: list[uuid.UUID],
    executor_id: str,
    lease: timedelta,
    serves: list[str],
) -> dict[tuple[uuid.UUID, uuid.UUID], tuple]:
    """Run the start's or the accept's batch statement (the same parameters) and read its rows
    — job id, event id, then what the executor needs — by delivery."""
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                json.dumps(document),
                executor_id,
                lease,
                job_ids,
                [str(status) for status in sorted(transition.sources)],
                list(serves),
                executor_id,
            ],
        )
        rows = cursor.fetchall()
    found = {}
    for job_id, event_id, *row in rows:
        if isinstance(row[2], str):  # jsonb arrives as text, as JSONField reads
            row[2] = json.loads(row[2])
        found[job_id, event_id] = tuple(row)
    return found


@lru_cache(maxsize=4)
def _start_many_sql(name: str) -> str:
    transition = TRANSITIONS[name]
    qn = connection.ops.quote_name
    table, jobs = qn(JobExecution._meta.db_table), qn(_job_model()._meta.db_table)
    ctes = [
        "clock AS MATERIALIZED (SELECT clock_timestamp() AS now)",
        "batch AS MATERIALIZED (SELECT * FROM jsonb_to_recordset(%s::jsonb) "
        "AS b(job_id uuid, event_id uuid, worker_id text, ran float8))",
        f"moved AS (UPDATE {table} e SET {_moving(transition, 'clock.now')}, "
        "started_at = clock.now - make_interval(secs => b.ran), worker_id = %s, "
        "attempt_count = e.attempt_count + 1, "
        "lease_expires_at = clock.now + %s "
        f"FROM clock, batch b WHERE {_BATCH_ROWS} AND e.queue_name = ANY(%s) "
        f"AND {_NOT_ACCEPTED_BY_ANOTHER} "
        f"RETURNING {_execution_columns('e')}, clock.now AS db_now)",
        f"opened AS ({attempts.open_many_step()})",
    ]
    return (
        f"WITH {', '.join(ctes)} SELECT moved.job_id, moved.current_event_id, "
        f"{_started_reading()}{_notify(transition)} "
        f"FROM moved JOIN {jobs} j ON j.id = moved.job_id"
    )


@named("UPDATE DISPATCHED deliveries an executor takes into its line: accepted, fenced per row")
def executions_accept(
    transition: Transition,
    *,
    deliveries: list[tuple[uuid.UUID, uuid.UUID]],
    executor_id: str,
    lease: timedelta,
    serves: list[str],
) -> dict[tuple[uuid.UUID, uuid.UUID], tuple]:
    """Mark many DISPATCHED (job id, event id) accepted by `executor_id`, its lease the
    executor's to renew, one statement, each row fenced by its own token: {(job id, event
    id): (the attempt it would be, job_type, instruction, trace_id, traceparent,
    timeout_seconds, hard_timeout_seconds, workflow_id, redelivery_count, queue_name)} for the ones
    accepted. A stale token, an unserved queue or a delivery another executor accepted
    leaves its row as it was."""
    document = [{"job_id": str(j), "event_id": str(e)} for j, e in deliveries]
    job_ids = [job_id for job_id, _ in deliveries]
    sql = _accept_many_sql(transition.name)
    return _by_delivery(sql, transition, document, job_ids, executor_id, lease, serves)


@lru_cache(maxsize=4)
def _accept_many_sql(name: str) -> str:
    transition = TRANSITIONS[name]
    assert transition.target in transition.sources, "an accept leaves the status as it is"
    qn = connection.ops.quote_name
    table, jobs = qn(JobExecution._meta.db_table), qn(_job_model()._meta.db_table)
    node = qn(Node._meta.db_table)
    ctes = [
        "clock AS MATERIALIZED (SELECT clock_timestamp() AS now)",
        "batch AS MATERIALIZED (SELECT * FROM jsonb_to_recordset(%s::jsonb) "
        "AS b(job_id uuid, event_id uuid))",
        f"moved AS (UPDATE {table} e SET {_moving(transition, 'clock.now')}, "
        "accepted = true, worker_id = %s, lease_expires_at = clock.now + %s "
        f"FROM clock, batch b WHERE {_BATCH_ROWS} AND e.queue_name = ANY(%s) "
        f"AND {_NOT_ACCEPTED_BY_ANOTHER} "
        "RETURNING e.job_id, e.current_event_id, e.attempt_count, e.redelivery_count, "
        "e.queue_name)",
    ]
    return (
        f"WITH {', '.join(ctes)} SELECT moved.job_id, moved.current_event_id, "
        "moved.attempt_count + 1, j.job_type, j.instruction, j.trace_id, j.traceparent, "
        "j.timeout_seconds, j.hard_timeout_seconds, "
        f"(SELECT n.workflow_id FROM {node} n WHERE n.job_id = moved.job_id), "
        f"moved.redelivery_count, moved.queue_name FROM moved JOIN {jobs} j ON j.id = moved.job_id"
    )


@named(
    "UPDATE DISPATCHED → RUNNING → COMPLETED for many accepted deliveries that ran before their "
    "start was written, INSERT their SUCCESS attempts and their events"
)
def executions_start_and_complete(
    start: Transition, complete: Transition, *, completions: list[dict], executor_id: str
) -> list[tuple[uuid.UUID, float]]:
    """The start and the completion of many deliveries `executor_id` accepted and ran, in one
    statement, each row fenced by its own token: its two moves' bookkeeping, the attempt
    recorded whole (started `ran` seconds before the statement, on the database clock), the
    completion's events. `completions`: {"job_id", "event_id", "worker_id", "ran",
    "steps_completed", "total_steps", "log_lines", "result"} each. Returns (job id, the
    start's wait since the dispatch) for those completed; a refused row (a cancel, or a rescue
    that took the delivery) changes nothing. Not for a workflow's job."""
    document = _completions_document(completions, also=("worker_id", "ran"))
    events = [event.topic for event in complete.events]
    with connection.cursor() as cursor:
        cursor.execute(
            _start_and_complete_sql(start.name, complete.name),
            [
                json.dumps(document),
                executor_id,
                [c["job_id"] for c in completions],
                [str(status) for status in sorted(start.sources)],
                executor_id,
                *events,
            ],
        )
        return [(job_id, float(waited)) for job_id, waited, *_ in cursor.fetchall()]


@lru_cache(maxsize=4)
def _start_and_complete_sql(start_name: str, complete_name: str) -> str:
    start, complete = TRANSITIONS[start_name], TRANSITIONS[complete_name]
    assert start.target in complete.sources, "the completion follows the start"
    assert not start.events, "a start writes no events"
    qn = connection.ops.quote_name
    table = qn(JobExecution._meta.db_table)
    events = _completed_events_sql(complete)
    ctes = [
        "clock AS MATERIALIZED (SELECT clock_timestamp() AS now)",
        "batch AS MATERIALIZED (SELECT * FROM jsonb_to_recordset(%s::jsonb) AS b(job_id uuid, "
        "event_id uuid, worker_id text, ran float8, steps_completed int, total_steps int, "
        "log_lines jsonb, result jsonb))",
        # Both moves in one UPDATE: a row is written once (one new version, not two), and its
        # version counts both.
        f"moved AS (UPDATE {table} e SET status = {status_literal(complete.target)}, "
        "version = e.version + 2, updated_at = clock.now, "
        "started_at = clock.now - make_interval(secs => b.ran), worker_id = %s, "
        "attempt_count = e.attempt_count + 1, accepted = false, "
        f"{_COMPLETED_ASSIGNMENTS} "
        f"FROM clock, batch b WHERE {_BATCH_ROWS} AND e.accepted AND e.worker_id = %s "
        "RETURNING e.job_id, e.current_event_id, e.attempt_count, e.started_at, "
        "e.dispatched_at, clock.now AS db_now)",
        *(f"event{index} AS ({sql})" for index, sql in enumerate(events)),
        f"opened AS ({attempts.closed_many_step()})",
    ]
    return (
        f"WITH {', '.join(ctes)} SELECT moved.job_id, "
        "GREATEST(EXTRACT(EPOCH FROM moved.started_at - moved.dispatched_at), 0)"
        f"{_notify(complete, many=True)} FROM moved"
    )


def _completions_document(completions: list[dict], also: tuple[str, ...] = ()) -> list[dict]:
    """A batch of successes as the JSON rows their statement reads (`batch`): ids as text,
    each attempt's report, and the keys `also`."""
    keys = ("steps_completed", "total_steps", "log_lines", "result", *also)
    return [
        {"job_id": str(c["job_id"]), "event_id": str(c["event_id"])} | {k: c[k] for k in keys}
        for c in completions
    ]


def _completed_events_sql(transition: Transition) -> list[str]:
    """The INSERTs of the events a completion writes, one per event, over `moved` and its job."""
    jobs = connection.ops.quote_name(_job_model()._meta.db_table)
    return [
        event_rows.insert_select_sql(
            "moved.job_id::text",
            event_rows.payload_sql(event, _COMPLETED_SOURCES[event]),
            "j.trace_id",
            f"FROM moved JOIN {jobs} j ON j.id = moved.job_id",
        )
        for event in transition.events
    ]


# The sources of the events a completion writes, over `moved` and its job `j`.
_COMPLETED_SOURCES = {
    JOB_COMPLETED: {
        "job_id": "moved.job_id",
        "event_id": "moved.current_event_id",
        "trace_id": "j.trace_id",
        "attempt": "moved.attempt_count",
        "completed_at": "moved.db_now",
    }
}


_COMPLETED_ASSIGNMENTS = "finished_at = clock.now, lease_expires_at = NULL, last_error = ''"


def _completion_steps(
    transition: Transition, event_id: uuid.UUID, attempt_fields: dict
) -> tuple[tuple[str, list], ...]:
    """A completion's steps over `moved`: its events, then the close of its attempt."""
    jobs = connection.ops.quote_name(_job_model()._meta.db_table)
    events = tuple(
        (
            event_rows.insert_select_sql(
                "moved.job_id::text",
                event_rows.payload_sql(event, _COMPLETED_SOURCES[event]),
                "j.trace_id",
                f"FROM moved JOIN {jobs} j ON j.id = moved.job_id",
            ),
            [event.topic],
        )
        for event in transition.events
    )
    return (*events, attempts.close_step(event_id=event_id, fields=attempt_fields))


@named("UPDATE RUNNING → COMPLETED for the token's holder, close its attempt, INSERT its events")
def execution_complete(
    transition: Transition, *, job_id: uuid.UUID, event_id: uuid.UUID, attempt_fields: dict
) -> bool:
    return (
        _fenced(
            transition,
            job_id=job_id,
            event_id=event_id,
            assignments=_COMPLETED_ASSIGNMENTS,
            params=[],
            steps=_completion_steps(transition, event_id, attempt_fields),
        )
        is not None
    )


@named("UPDATE RUNNING → COMPLETED for many tokens' holders, close their attempts, INSERT events")
def executions_complete(transition: Transition, *, completions: list[dict]) -> list[uuid.UUID]:
    """`execution_complete` for many executions at once (the executor's batched writer): one
    statement whatever their number, each row fenced by its own token, the rows the fence
    refuses left as they were. `completions`: {"job_id", "event_id", "steps_completed",
    "total_steps", "log_lines", "result"} each (None: leave the attempt's value). Returns the
    jobs completed. Not for a workflow's job: its completion settles its workflow."""
    document = _completions_document(completions)
    events = [event.topic for event in transition.events]
    with connection.cursor() as cursor:
        job_ids = [c["job_id"] for c in completions]
        cursor.execute(
            _complete_many_sql(transition.name),
            [json.dumps(document), job_ids, [str(s) for s in sorted(transition.sources)], *events],
        )
        return [job_id for job_id, *_ in cursor.fetchall()]


@lru_cache(maxsize=4)
def _complete_many_sql(name: str) -> str:
    transition = TRANSITIONS[name]
    qn = connection.ops.quote_name
    table = qn(JobExecution._meta.db_table)
    attempts_table = qn(attempts.ExecutionAttempt._meta.db_table)
    events = _completed_events_sql(transition)
    ctes = [
        "clock AS MATERIALIZED (SELECT clock_timestamp() AS now)",
        "batch AS MATERIALIZED (SELECT * FROM jsonb_to_recordset(%s::jsonb) AS b(job_id uuid, "
        "event_id uuid, steps_completed int, total_steps int, log_lines jsonb, result jsonb))",
        # Each row by its own token: a delivery is completed by one thread only, so two batches
        # never hold the same row; the rescue and the cancels skip or take one row at a time.
        f"moved AS (UPDATE {table} e SET {_moving(transition, 'clock.now')}, "
        f"{_COMPLETED_ASSIGNMENTS} "
        f"FROM clock, batch b WHERE {_BATCH_ROWS} "
        "RETURNING e.job_id, e.current_event_id, e.attempt_count, clock.now AS db_now)",
        *(f"event{index} AS ({sql})" for index, sql in enumerate(events)),
        f"closed AS (UPDATE {attempts_table} a SET outcome = '{AttemptOutcome.SUCCESS}', "
        "error_message = '', finished_at = moved.db_now, "
        "steps_completed = COALESCE(b.steps_completed, a.steps_completed), "
        "total_steps = COALESCE(b.total_steps, a.total_steps), "
        "log_lines = COALESCE(b.log_lines, a.log_lines), result = COALESCE(b.result, a.result) "
        "FROM moved JOIN batch b ON b.event_id = moved.current_event_id "
        f"WHERE a.event_id = b.event_id AND a.outcome = '{AttemptOutcome.RUNNING}')",
    ]
    return f"WITH {', '.join(ctes)} SELECT moved.job_id{_notify(transition, many=True)} FROM moved"


@named(
    "UPDATE RUNNING → COMPLETED for the token's holder with its attempt and events, and settle "
    "its workflow: its dependents' counts, the ones released, the workflow's count and finish"
)
def execution_complete_in_workflow(
    transition: Transition, *, job_id: uuid.UUID, event_id: uuid.UUID, attempt_fields: dict
) -> tuple[int, str | None] | None:
    """`execution_complete` for a job of a workflow (§16), still one statement: (how many of
    its dependents it released, the workflow's status if this completion finished it); None
    when the fence refused it. Each count is an UPDATE of its row, which waits for the row's
    lock and then applies to the committed value, so exactly one completion releases a job
    and exactly one finishes the workflow."""
    steps = _completion_steps(transition, event_id, attempt_fields)
    settle, reading = _workflow_settle_steps(len(steps))
    row = _fenced(
        transition,
        job_id=job_id,
        event_id=event_id,
        assignments=_COMPLETED_ASSIGNMENTS,
        params=[],
        steps=(*steps, *settle),
        reading=reading,
    )
    return None if row is None else (row[0], row[1])


def _workflow_settle_steps(base: int) -> tuple[list[tuple[str, list]], str]:
    """The steps after `base` others that settle a completed job's workflow, and the reading
    (released count, finished status) over them."""
    t = workflow_rows.tables()
    unblock, finish = TRANSITIONS["unblock"], WORKFLOW_TRANSITIONS["finish"]
    deps, counted, released, workflow = (f"step{base + n}" for n in range(4))
    running = ", ".join(f"'{status}'" for status in sorted(finish.sources))
    just_finished = f"w.unfinished = 1 AND w.status IN ({running})"
    ends = {
        "cancelled": WorkflowStatus.CANCELLED,
        "failed": WorkflowStatus.FAILED,
        "completed": WorkflowStatus.COMPLETED,
    }
    assert set(ends.values()) == finish.targets
    finished_status = (
        f"CASE WHEN w.cancelled THEN '{ends['cancelled']}' WHEN w.failed > 0 "
        f"THEN '{ends['failed']}' ELSE '{ends['completed']}' END"
    )
    steps = [
        (
            f"SELECT d.job_id, count(*) AS n FROM {t['dependency']} d "
            "JOIN moved ON d.depends_on_id = moved.job_id GROUP BY d.job_id",
            [],
        ),
        (
            f"UPDATE {t['node']} AS n SET waiting_on = GREATEST(n.waiting_on - s.n, 0) "
            f"FROM {deps} s WHERE n.job_id = s.job_id RETURNING n.job_id, n.waiting_on",
            [],
        ),
        (
            f"UPDATE {t['execution']} AS e SET {_moving(unblock, 'clock.now')}, set_aside = false "
            f"FROM {counted} c, clock WHERE e.job_id = c.job_id AND c.waiting_on = 0 "
            f"AND e.status IN ({_statuses(unblock.sources)}) RETURNING e.job_id",
            [],
        ),
        (
            f"UPDATE {t['workflow']} AS w SET unfinished = w.unfinished - 1, "
            f"status = CASE WHEN {just_finished} THEN {finished_status} ELSE w.status END, "
            f"finished_at = CASE WHEN {just_finished} THEN clock.now ELSE w.finished_at END, "
            "version = w.version + 1, updated_at = clock.now FROM clock "
            f"WHERE w.id = (SELECT n.workflow_id FROM {t['node']} n "
            "JOIN moved ON n.job_id = moved.job_id) "
            "RETURNING w.id, w.status, w.name, w.trace_id, w.finished_at, "
            "(w.unfinished = 0 AND w.finished_at = clock.now) AS finished_now",
            [],
        ),
        (
            event_rows.insert_select_sql(
                "w.id::text",
                event_rows.payload_sql(
                    WORKFLOW_FINISHED,
                    {
                        "workflow_id": "w.id",
                        "name": "w.name",
                        "status": "w.status",
                        "finished_at": "w.finished_at",
                    },
                ),
                "w.trace_id",
                f"FROM {workflow} w WHERE w.finished_now",
            ),
            [WORKFLOW_FINISHED.topic],
        ),
    ]
    reading = (
        f"(SELECT count(*) FROM {released}), "
        f"(SELECT w.status FROM {workflow} w WHERE w.finished_now)"
    )
    return steps, reading


@named("UPDATE DISPATCHED → PENDING a delivery of a queue its executor does not serve, fenced")
def execution_hand_back(
    transition: Transition, *, job_id: uuid.UUID, event_id: uuid.UUID, serves: list[str]
) -> bool:
    row = _fenced(
        transition,
        job_id=job_id,
        event_id=event_id,
        assignments="next_run_at = clock.now, current_event_id = NULL, lease_expires_at = NULL, "
        "worker_id = '', redelivery_count = e.redelivery_count + 1",
        params=[],
        also_where="AND NOT (e.queue_name = ANY(%s))",
        where_params=(list(serves),),
    )
    return row is not None


@named("UPDATE the lease of a RUNNING execution whose token is current and no cancel requested")
def execution_heartbeat(
    transition: Transition, *, job_id: uuid.UUID, event_id: uuid.UUID, lease: timedelta
) -> bool:
    row = _fenced(
        transition,
        job_id=job_id,
        event_id=event_id,
        assignments="lease_expires_at = clock.now + %s",
        params=[lease],
        also_where="AND NOT e.cancel_requested",
    )
    return row is not None


@named("SELECT whether the token's holder may go on: RUNNING, token current, no cancel requested")
def execution_may_go_on(*, job_id: uuid.UUID, event_id: uuid.UUID) -> bool:
    return JobExecution.objects.filter(
        job_id=job_id,
        current_event_id=event_id,
        status=ExecutionStatus.RUNNING,
        cancel_requested=False,
    ).exists()


# --- set-based moves ----------------------------------------------------------------------------


def _move_set(transition: Transition, assignments: str, where: str, params: list) -> int:
    table = connection.ops.quote_name(JobExecution._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS e SET {_moving(transition, 'clock_timestamp()')}, {assignments} "
            f"WHERE e.status IN ({_statuses(transition.sources)}) AND {where}",
            params,
        )
        return cursor.rowcount


@named("UPDATE deliveries whose publish failed back to PENDING, due now, fenced by their tokens")
def executions_unsend(transition: Transition, *, event_ids: list[uuid.UUID]) -> int:
    return _move_set(
        transition,
        "next_run_at = clock_timestamp(), current_event_id = NULL, lease_expires_at = NULL, "
        "worker_id = '', redelivery_count = e.redelivery_count + 1",
        "e.current_event_id = ANY(%s)",
        [list(event_ids)],
    )


@named("UPDATE the dispatch lease of deliveries an executor holds for a free slot")
def executions_hold(
    transition: Transition,
    *,
    event_ids: list[uuid.UUID],
    executor_id: str,
    lease: timedelta,
    accepted_lease: timedelta,
) -> int:
    # An accepted delivery may be running, its start not yet written: it holds the shorter
    # lease, so that the rescue sends it again soon after its executor died; and only that
    # executor renews it (another one holding a duplicate record would keep it alive).
    # A row another transaction holds is being moved right now (the executor's writer ending
    # it, a claim, the rescue): skipped, not waited for. Waiting, this multi-row UPDATE and the
    # writer's, locking shared rows in different orders, deadlocked, and both stood still for
    # PostgreSQL's deadlock_timeout (1 s) before one was aborted (bench/NOTES.md). A skipped
    # row keeps its lease to the next beat's hold; a lease lasts several beats.
    table = connection.ops.quote_name(JobExecution._meta.db_table)
    return _move_set(
        transition,
        "lease_expires_at = clock_timestamp() + CASE WHEN e.accepted THEN %s ELSE %s END",
        f"e.id IN (SELECT e.id FROM {table} e WHERE e.status IN "
        f"({_statuses(transition.sources)}) AND e.current_event_id = ANY(%s) "
        f"AND {_NOT_ACCEPTED_BY_ANOTHER} FOR UPDATE SKIP LOCKED)",
        [accepted_lease, lease, list(event_ids), executor_id],
    )


@named("UPDATE the DISPATCHED executions of paused queues or job types back to PENDING")
def executions_recall(
    transition: Transition, *, queue_names: list[str], job_types: list[str]
) -> int:
    return _move_set(
        transition,
        "current_event_id = NULL, lease_expires_at = NULL, worker_id = ''",
        # An accepted delivery may already run (its start not yet written): it stays.
        "(e.queue_name = ANY(%s) OR e.job_type = ANY(%s)) AND NOT e.accepted",
        [list(queue_names), list(job_types)],
    )


@named("UPDATE deliveries an executor accepted and gives back unstarted (paused) to PENDING")
def executions_recall_accepted(
    transition: Transition, *, event_ids: list[uuid.UUID], executor_id: str
) -> int:
    return _move_set(
        transition,
        "current_event_id = NULL, lease_expires_at = NULL, worker_id = '', accepted = false",
        "e.current_event_id = ANY(%s) AND e.accepted AND e.worker_id = %s",
        [list(event_ids), executor_id],
    )


@named("SELECT how many DISPATCHED executions of these queues or job types are accepted")
def executions_accepted_count(*, queue_names: list[str], job_types: list[str]) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {connection.ops.quote_name(JobExecution._meta.db_table)} e "
            f"WHERE e.status = {status_literal(ExecutionStatus.DISPATCHED)} AND e.accepted "
            "AND (e.queue_name = ANY(%s) OR e.job_type = ANY(%s))",
            [list(queue_names), list(job_types)],
        )
        return cursor.fetchone()[0]


# --- a workflow's waiting jobs (§16) --------------------------------------------------------------


@named("UPDATE WAITING executions whose dependencies are done to PENDING, in their place")
def executions_unblock(transition: Transition, *, job_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    # next_run_at stays what the submission made it (its runAt, or its submit time): a released
    # job takes its place in line by when it was submitted, not behind newer work.
    return _move_set_returning(
        transition, "set_aside = false", "e.job_id = ANY(%s)", [list(job_ids)]
    )


@named("UPDATE WAITING executions to CANCELLED, each with its reason (a dependency failed)")
def executions_dependency_failed(
    transition: Transition, *, reasons: dict[uuid.UUID, str]
) -> list[uuid.UUID]:
    table = connection.ops.quote_name(JobExecution._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS e SET {_moving(transition, 'clock_timestamp()')}, "
            "finished_at = clock_timestamp(), last_error = v.reason "
            "FROM unnest(%s::uuid[], %s::text[]) AS v(job_id, reason) "
            f"WHERE e.job_id = v.job_id AND e.status IN ({_statuses(transition.sources)}) "
            "RETURNING e.job_id",
            [list(reasons), list(reasons.values())],
        )
        return [row[0] for row in cursor.fetchall()]


@named("UPDATE CANCELLED executions back to WAITING with a fresh retry budget (a reopen)")
def executions_reopen(transition: Transition, *, job_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    return _move_set_returning(
        transition,
        "finished_at = NULL, last_error = '', retry_count = 0, cancel_requested = false, "
        "current_event_id = NULL, lease_expires_at = NULL",
        "e.job_id = ANY(%s)",
        [list(job_ids)],
    )


@named("UPDATE a workflow's unfinished executions: WAITING, PENDING, DISPATCHED to CANCELLED")
def executions_cancel_set(transition: Transition, *, job_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    return _move_set_returning(
        transition,
        "finished_at = clock_timestamp(), last_error = 'cancelled', current_event_id = NULL, "
        "lease_expires_at = NULL",
        "e.job_id = ANY(%s)",
        [list(job_ids)],
    )


@named("UPDATE RUNNING executions of a workflow: cancel requested (their workers stop)")
def executions_request_cancel_set(
    transition: Transition, *, job_ids: list[uuid.UUID]
) -> list[uuid.UUID]:
    return _move_set_returning(
        transition, "cancel_requested = true", "e.job_id = ANY(%s)", [list(job_ids)]
    )


def _move_set_returning(
    transition: Transition, assignments: str, where: str, params: list
) -> list[uuid.UUID]:
    table = connection.ops.quote_name(JobExecution._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} AS e SET {_moving(transition, 'clock_timestamp()')}, {assignments} "
            f"WHERE e.status IN ({_statuses(transition.sources)}) AND {where} RETURNING e.job_id",
            params,
        )
        return [row[0] for row in cursor.fetchall()]
