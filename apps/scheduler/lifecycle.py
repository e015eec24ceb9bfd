"""THE state machine of a job's execution (ARCHITECTURE §4): its one home.

`TRANSITIONS` is the table — every way a JobExecution's status may change: from which states, to
which, who may trigger it, and whether the trigger must hold the fencing token. `_apply` is the
one helper that moves a locked row along a row of that table: it checks the status, bumps
`version`, saves only the fields that changed and writes the transition's outbox events in the
same transaction. Dispatch, the executor, rescue and the operator's actions all come here; no
other module writes `JobExecution.status`.

Locking rules. Every function here runs inside its caller's transaction (it asserts so): the
caller decides what commits together (the executor: the transition and its attempt row; the
rescuer: a batch). Rows are locked by job id with SELECT … FOR UPDATE, and the fencing token is
checked *after* the lock: a delivery can arrive while the dispatcher that sent it still holds the
row, and locking by id waits for that commit and then reads the committed token.

Three exceptions, the transitions every job makes on its worker: the heartbeat, the start and
the completion are each one conditional UPDATE whose WHERE holds the fence and the from-states
(`_worker_move`). An UPDATE waits for a row lock and then evaluates its WHERE again on the
committed row, so it is the same check as lock-then-read, atomic by itself; what must commit with
a start or a completion (the attempt's row, the outbox event) is written by the same statement.

Why one module of about 550 lines: it is the whole state machine — the table, the helper, and one
function per transition, per-row and set-based — and finding every way a status changes in one
place is worth more than a shorter file.

One clock. Times that decide something — leases, due times, start and finish times — come from
the database (`DatabaseNow`, read with the row lock), never from this process's wall clock.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import NamedTuple

from django.conf import settings
from django.db import connection
from django.db.models import F, Q

from apps.core import metrics
from apps.core.db import DatabaseNow, assert_in_transaction, seconds
from apps.core.errors import InvalidStateTransition, JobNotFound
from apps.core.kafka import JOB_COMPLETED, JOB_DEAD_LETTER, JOB_FAILED
from apps.core.timeutil import iso
from apps.jobs.models import Job
from apps.outbox.services import outbox_enqueue, outbox_enqueue_step, relay_after_commit
from apps.scheduler import flow, rows
from apps.scheduler.flow import DISPATCH_CHANNEL, notify_dispatch
from apps.scheduler.limits import NO_RULES, DispatchRules
from apps.scheduler.models import ExecutionStatus, JobExecution
from apps.scheduler.retry import RetryDecision, policy_from_settings

logger = logging.getLogger(__name__)

S = ExecutionStatus


class Actor(StrEnum):
    DISPATCHER = "dispatcher"  # the scheduler's dispatch (beat tick, submit fast path)
    WORKER = "worker"  # an executor holding the delivery's fencing token
    RESCUER = "rescuer"  # the lease rescue, for a lease that expired
    OPERATOR = "operator"  # API, admin, CLI


@dataclass(frozen=True)
class Transition:
    sources: frozenset[ExecutionStatus]
    target: ExecutionStatus
    actors: frozenset[Actor]
    # Fenced transitions are made for the holder of `current_event_id` only: a late or duplicate
    # message, or a worker whose lease was taken away, changes nothing.
    fenced: bool


def _t(sources: set[ExecutionStatus], target: ExecutionStatus, *actors: Actor, fenced: bool):
    return Transition(frozenset(sources), target, frozenset(actors), fenced)


WORKER, RESCUER, OPERATOR = Actor.WORKER, Actor.RESCUER, Actor.OPERATOR

# name -> (from-states, to-state, who, fenced). Submission creates the execution PENDING.
TRANSITIONS: dict[str, Transition] = {
    "dispatch": _t({S.PENDING}, S.DISPATCHED, Actor.DISPATCHER, fenced=False),
    # The executor holding the delivery renews its dispatch lease while it waits for a slot.
    "hold": _t({S.DISPATCHED}, S.DISPATCHED, WORKER, fenced=True),
    # The dispatch lease expired before any worker started the delivery (its executor stopped,
    # or the message was lost), or the publish failed: sent again later with a fresh token, no
    # attempt recorded, no retry used.
    "redeliver": _t({S.DISPATCHED}, S.PENDING, RESCUER, Actor.DISPATCHER, fenced=True),
    # A pause took back deliveries no worker had started: waiting again, in their place in
    # line, token cleared (the message still on Kafka is fenced off), nothing counted.
    "recall": _t({S.DISPATCHED}, S.PENDING, Actor.OPERATOR, fenced=False),
    "start": _t({S.DISPATCHED}, S.RUNNING, WORKER, fenced=True),
    "heartbeat": _t({S.RUNNING}, S.RUNNING, WORKER, fenced=True),  # extends the lease only
    "complete": _t({S.RUNNING}, S.COMPLETED, WORKER, fenced=True),
    # A failed attempt (or a lost one, found by the rescuer): retry with backoff or dead-letter.
    "retry": _t({S.RUNNING}, S.PENDING, WORKER, RESCUER, fenced=True),
    "dead_letter": _t({S.RUNNING}, S.FAILED, WORKER, RESCUER, fenced=True),
    # The attempt stopped after a cancel request (cooperatively, by failing, or lost).
    "end_cancelled": _t({S.RUNNING}, S.CANCELLED, WORKER, RESCUER, fenced=True),
    # The worker shuts down: the job is due again at once, no retry used.
    "release": _t({S.RUNNING}, S.PENDING, WORKER, fenced=True),
    "cancel": _t({S.PENDING, S.DISPATCHED}, S.CANCELLED, OPERATOR, fenced=False),
    "request_cancel": _t({S.RUNNING}, S.RUNNING, OPERATOR, fenced=False),  # the worker stops itself
    "operator_retry": _t({S.FAILED, S.CANCELLED}, S.PENDING, OPERATOR, fenced=False),
    # An operator makes a delayed (runAt or backoff) job due now; the status stays PENDING.
    "run_now": _t({S.PENDING}, S.PENDING, OPERATOR, fenced=False),
    # Waiting work of a key at its limit leaves the claim's line, and goes back in line when
    # the key has room (apps/scheduler/limits.py); the status stays PENDING.
    "set_aside": _t({S.PENDING}, S.PENDING, Actor.DISPATCHER, fenced=False),
    "put_back": _t({S.PENDING}, S.PENDING, Actor.DISPATCHER, fenced=False),
}

# Executions holding a credit of flow control (ARCHITECTURE §4a).
IN_FLIGHT = frozenset({S.DISPATCHED, S.RUNNING})


def _lock(job_id: uuid.UUID, *, event_id: uuid.UUID | None = None) -> JobExecution | None:
    """The job's execution under a row lock, annotated with the database's `db_now`; None if
    there is none or, when `event_id` is given, when that is not the current fencing token."""
    assert_in_transaction("locking an execution")
    execution = rows.execution_lock(job_id)
    if execution is None:
        return None
    if event_id is not None and execution.current_event_id != event_id:
        return None
    return execution


def allows(execution: JobExecution, name: str) -> bool:
    return execution.status in TRANSITIONS[name].sources


def _apply(
    execution: JobExecution,
    name: str,
    *,
    actor: Actor,
    changes: dict,
    events: tuple[tuple[str, dict], ...] = (),
) -> JobExecution:
    """Move a locked execution along transition `name`: check the from-state, set the to-state
    and `changes`, bump `version`, save only those fields, and write the outbox `events` (topic,
    payload) in the same transaction. Raises InvalidStateTransition from a wrong state."""
    transition = TRANSITIONS[name]
    if actor not in transition.actors:
        raise PermissionError(f"{actor} may not trigger {name}")
    if execution.status not in transition.sources:
        raise InvalidStateTransition(
            f"Job {execution.job_id} is {execution.status}; {name} needs "
            f"{' or '.join(sorted(transition.sources))}",
            job_id=execution.job_id,
        )
    frees_a_credit = execution.status in IN_FLIGHT and transition.target not in IN_FLIGHT
    changes = {"status": transition.target, **changes}
    for field, value in changes.items():
        setattr(execution, field, value)
    execution.version += 1
    rows.execution_save(execution, [*changes, "version"])
    for topic, payload in events:
        outbox_enqueue(
            topic=topic, key=str(execution.job_id), trace_id=execution.job.trace_id, payload=payload
        )
    if frees_a_credit:
        notify_dispatch()
    metrics.count_on_commit(metrics.TRANSITIONS.labels(name).inc)
    return execution


# A statement's part over `moved`, the row a one-statement transition just wrote: (SQL, params).
Step = tuple[str, list]


def _worker_move(
    name: str,
    *,
    job_id: uuid.UUID,
    event_id: uuid.UUID,
    assignments: str,
    params: list,
    steps: list[Step],
    reading: str = "moved.id",
) -> tuple | None:
    """`_apply` for the worker's start and completion, the two transitions every job makes: one
    statement instead of a transaction of five to seven (apps/scheduler/rows.py). The fence and
    the from-states are its WHERE clause — atomic by itself, as the heartbeat's — and what must
    commit with the transition (the attempt's row, the outbox event) are `steps` of the same
    statement. A transition that frees a credit sends its NOTIFY from the statement too."""
    transition = TRANSITIONS[name]
    assert transition.fenced and Actor.WORKER in transition.actors, name
    frees_a_credit = bool(transition.sources & IN_FLIGHT) and transition.target not in IN_FLIGHT
    row = rows.execution_move(
        job_id=job_id,
        event_id=event_id,
        sources=transition.sources,
        target=transition.target,
        assignments=assignments,
        params=params,
        steps=steps,
        notify=DISPATCH_CHANNEL if frees_a_credit else None,
        reading=reading,
    )
    if row is not None:
        metrics.count_on_commit(metrics.TRANSITIONS.labels(name).inc)
    return row


# --- submission and dispatch ----------------------------------------------------------------


def execution_create(*, job) -> JobExecution:
    """The PENDING execution of a newly submitted job, due at its `run_at` or at once (inside
    the submit transaction)."""
    assert_in_transaction("execution_create")
    (execution,) = rows.executions_insert([job])
    return execution


def executions_create(*, jobs: list) -> list[JobExecution]:
    """The PENDING executions of a batch of newly submitted jobs, each due at its `run_at` or at
    once (database clock), in the jobs' order: one INSERT inside the submit transaction
    (rows.executions_insert)."""
    assert_in_transaction("executions_create")
    return rows.executions_insert(jobs)


class Claim(NamedTuple):
    """One execution claimed for dispatch."""

    job_id: uuid.UUID
    event_id: uuid.UUID
    trace_id: str  # the job's, carried by its run_job message and into the executor's logs
    waited_seconds: float  # from due (next_run_at) to dispatched, on the database clock


class Claims(list):
    """The claims of one `executions_claim`, in dispatch order (a list of `Claim`).

    `left_for_limits`: rows the claim read and left PENDING because their key had used its
    allowance in this claim (limits.py). Its window of `limit` rows may be full of one key's
    work while other keys wait below: the dispatcher claims again once those keys are
    blocked, and set aside, rather than leave its credits unspent (dispatch.py)."""

    left_for_limits: int = 0


def executions_dispatch(
    *,
    limit: int,
    job_ids: list[uuid.UUID] | None = None,
    due_by: datetime | None = None,
    rules: DispatchRules = NO_RULES,
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """`executions_claim` as (job id, event id) pairs in dispatch order."""
    claims = executions_claim(limit=limit, job_ids=job_ids, due_by=due_by, rules=rules)
    return [(claim.job_id, claim.event_id) for claim in claims]


# How far down the one line a claim looks while something is paused, before it reads the line
# per queue and job type (`_due_per_open_line`).
LOOK_AHEAD_ROWS = 32


def dispatch_planning() -> None:
    """The planner settings of a full dispatch (not the fast path's claim of given jobs), for
    the rest of its transaction: no bitmap scans, one plan per statement.

    Its statements read the line, a key's lines and the set-aside work in an index's order and
    stop at a limit. Planned while the statistics still said the table was nearly empty (a
    fresh database, or a quiet queue before a burst), the claim took a plan that read every
    due row through a bitmap scan and sorted them all for the first few: 2-5 ms a claim with
    5,000 waiting (auto_explain under make bench), growing with the backlog; the put-back's
    look at a key's work in line did the same with a key's flood. Without bitmap scans the
    index order is the plan, and one plan per statement is kept rather than one made per call.
    (A plan made before the table's first statistics can still pick another index of PENDING
    rows for the key probes of the set-aside and the put-back, and read all of them: seen on a
    fresh database under bench/tenants.py, 2-17 ms a put-back until autovacuum's first ANALYZE
    replanned it.) The dispatcher sets these with its lock (flow.lock_dispatch(planned=True)),
    before the set-aside and the put-back; `executions_claim(planned=True)` does not repeat
    them."""
    assert_in_transaction("dispatch_planning")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {flow.NO_BITMAP_SCANS}, {flow.GENERIC_PLANS}")


def executions_claim(
    *,
    limit: int,
    job_ids: list[uuid.UUID] | None = None,
    due_by: datetime | None = None,
    rules: DispatchRules = NO_RULES,
    workers: list[str] | None = None,
    planned: bool = False,
) -> Claims:
    """PENDING → DISPATCHED for up to `limit` due executions, highest priority first: one
    statement that claims (FOR UPDATE SKIP LOCKED, so concurrent dispatchers never take the same
    row), gives each a fresh fencing token and starts its dispatch lease. Returns the claims in
    dispatch order. `due_by` replaces the database clock for "due" (tests).

    `workers` (flow.assign's choice for the first, second, … delivery) records in the same
    statement which executor the n-th claim is sent to; flow control counts its credits by it.

    `rules` (apps/scheduler/limits.py) leave paused queues and job types and keys at a limit
    out of the scan, and take at most a key's allowance of the rows found; the rows left out
    stay PENDING. A claim of the line (no `job_ids`) sets `dispatch_planning` first, unless
    the caller did (`planned`)."""
    assert_in_transaction("executions_dispatch")
    assert workers is None or len(workers) >= limit, "a worker for every claim"
    transition = TRANSITIONS["dispatch"]
    (source,) = transition.sources
    # In line and due: the rows a claim may take, before its filters.
    waiting = rows.status_literal(source)
    due_in_line = (
        f"status = {waiting} AND NOT set_aside AND next_run_at <= "
        f"{'%s' if due_by is not None else 'clock_timestamp()'}"
    )
    # With a queue or a job type paused, the claim looks a few rows down the line, and reads
    # it per queue and job type when paused work fills them (`_due_per_open_line`): filtered
    # out of the one line, a paused backlog ahead of the rest was read on every claim.
    by_line = bool(rules.paused_queues or rules.paused_job_types) and job_ids is None
    due_params = [due_by] if due_by is not None else []
    filters = [("AND job_id = ANY(%s)", job_ids)] if job_ids is not None else []
    filters += [
        (clause, values)
        for clause, values in (
            ("AND queue_name <> ALL(%s)", () if by_line else rules.paused_queues),
            ("AND job_type <> ALL(%s)", () if by_line else rules.paused_job_types),
            ("AND (concurrency_key IS NULL OR concurrency_key <> ALL(%s))", rules.blocked_keys),
        )
        if values
    ]
    scan_filters = " ".join(clause for clause, _ in filters)
    filter_params = [list(values) for _, values in filters]
    line_params = [*due_params, *filter_params]
    params = list(line_params)
    if by_line:
        # `_due_per_open_line`'s parameters in the order of its text: the look down the line
        # (the due time), what of it is open (the paused, the filters), the claim of that (the
        # line's), the open lines (the paused) and the claim line by line (the line's).
        paused = [list(rules.paused_queues), list(rules.paused_job_types)]
        params = [*due_params, *paused, *filter_params, *line_params, *paused, *line_params]
    within_allowances = ""
    if rules.allowances:
        # A key's n-th row in claim order is taken while n is within its allowance.
        within_allowances = """,
            ranked AS (
                SELECT id, concurrency_key, row_number() OVER (
                    PARTITION BY concurrency_key ORDER BY priority DESC, next_run_at
                ) AS nth
                FROM due
            ),
            allowed AS (
                SELECT id FROM ranked
                WHERE concurrency_key IS NULL OR nth <= COALESCE((
                    SELECT a.allowed FROM unnest(%s::text[], %s::int[], %s::int[])
                        AS a(pattern, allowed, precedence)
                    WHERE ranked.concurrency_key LIKE a.pattern
                    ORDER BY a.precedence DESC LIMIT 1
                ), nth)
            )"""
        params += [
            [a.like for a in rules.allowances],
            [a.count for a in rules.allowances],
            [a.precedence for a in rules.allowances],
        ]
    params.append(workers or [])
    dispatch_lease = float(settings.JOBWEAVER_DISPATCH_TIMEOUT_SECONDS)
    table = JobExecution._meta.db_table
    jobs = JobExecution._meta.get_field("job").related_model._meta.db_table
    target = rows.status_literal(transition.target)
    # The statuses (the transition table's constants), the limit (an int) and the dispatch
    # lease (a setting) are written into the SQL rather than passed. With them as parameters
    # PostgreSQL kept making a custom plan for the prepared statement and planned every claim:
    # 0.2 ms a call, as long as running it (pg_stat_statements under make bench: 0.2 -> 0.02
    # ms). Now each limit is a statement of its own with one plan: at most
    # JOBWEAVER_DISPATCH_BATCH_SIZE of them (50), within psycopg's 100 prepared statements per
    # connection.
    if job_ids is None and not planned:
        dispatch_planning()
    with connection.cursor() as cursor:
        line = f"""
            SELECT id, priority, next_run_at, concurrency_key FROM {table}
            WHERE {due_in_line} {scan_filters}
            """
        due = (
            _due_per_open_line(
                table,
                waiting,
                line,
                limit,
                look_ahead=LOOK_AHEAD_ROWS,
                due_in_line=due_in_line,
                filters=scan_filters,
            )
            if by_line
            else f"""due AS (
                {line}
                ORDER BY priority DESC, next_run_at
                LIMIT {int(limit)}
                FOR UPDATE SKIP LOCKED
            )"""
        )
        cursor.execute(
            f"""
            WITH {"RECURSIVE " if by_line else ""}{due}{within_allowances},
            numbered AS (
                SELECT due.id, row_number() OVER (ORDER BY due.priority DESC, due.next_run_at)
                    AS n
                FROM due {"JOIN allowed USING (id)" if rules.allowances else ""}
            )
            UPDATE {table} AS e
            SET status = {target},
                current_event_id = gen_random_uuid(),
                worker_id = COALESCE((%s::text[])[numbered.n], e.worker_id),
                dispatched_at = clock_timestamp(),
                lease_expires_at = clock_timestamp() + make_interval(secs => {dispatch_lease!r}),
                version = e.version + 1,
                updated_at = clock_timestamp()
            FROM numbered, {jobs} AS j WHERE e.id = numbered.id AND j.id = e.job_id
            RETURNING numbered.n, e.job_id, e.current_event_id, j.trace_id,
                GREATEST(EXTRACT(EPOCH FROM e.dispatched_at - e.next_run_at), 0),
                {"(SELECT count(*) FROM due)" if rules.allowances else "0"}
            """,
            params,
        )
        claimed = cursor.fetchall()
    claimed.sort()
    metrics.count_on_commit(lambda: metrics.TRANSITIONS.labels("dispatch").inc(len(claimed)))
    claims = Claims(
        Claim(job_id, event_id, trace_id, float(waited))
        for _, job_id, event_id, trace_id, waited, _ in claimed
    )
    if claimed:
        claims.left_for_limits = claimed[0][-1] - len(claimed) if rules.allowances else 0
    return claims


def executions_set_aside(rules: DispatchRules, *, batch: int) -> int:
    """Transition "set_aside" for up to `batch` waiting executions of the keys at their limit
    that have work in line (`rules.set_aside_now`): out of the claim's line, still PENDING.
    Work of a paused queue or job type stays in line (the claim does not read a paused line),
    so what is set aside is what the key's room alone holds back. Returns how many.

    A blocked key's waiting work is read line by line, a line being its work of one queue and
    one job type (execution_key_line's order): the lines are found by skipping through the
    index one (queue, job type) at a time, and a paused one is never read. Filtered row by
    row, a blocked key's backlog in a paused queue was read by every dispatch (9.2 ms with
    50,000 of it, bench/dispatch_rules.py). Keys are blocked by what they have in flight or
    sent within the rate window, so their lines are few."""
    assert_in_transaction("executions_set_aside")
    if not rules.set_aside_now:
        return 0
    table = JobExecution._meta.db_table
    (source,) = TRANSITIONS["set_aside"].sources
    in_line = f"status = {rows.status_literal(source)} AND NOT set_aside"
    # The lines are found with `ORDER BY … LIMIT 1` in the index's own order, and each line is
    # read by equality on the index's three columns: plans the statistics cannot turn into a
    # sequential scan. Right after a flood was set aside they still said the key's rows were
    # in line, and `concurrency_key = ANY(…)` alone was read with a scan of the table (4 ms).
    # The UPDATE takes the held rows as an array of ids, as the put-back does (and why).
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH RECURSIVE blocked(key) AS (
                SELECT unnest(%s::text[])
            ),
            {_key_lines(table, in_line, "blocked")},
            held AS (
                SELECT line.id FROM lines CROSS JOIN LATERAL (
                    SELECT id FROM {table}
                    WHERE {in_line} AND concurrency_key = lines.key
                        AND queue_name = lines.queue_name AND job_type = lines.job_type
                    LIMIT {int(batch)}
                    FOR UPDATE SKIP LOCKED
                ) AS line
                WHERE lines.queue_name <> ALL(%s) AND lines.job_type <> ALL(%s)
                LIMIT {int(batch)}
            )
            UPDATE {table} AS e SET set_aside = true
            WHERE e.id = ANY(ARRAY(SELECT id FROM held))
            """,
            [list(rules.set_aside_now), *_paused(rules)],
        )
        moved = cursor.rowcount
    if moved:
        metrics.count_on_commit(lambda: metrics.TRANSITIONS.labels("set_aside").inc(moved))
    return moved


# How many of a key's rows in line `executions_put_back` reads to rank its set-aside work.
IN_LINE_PROBE_ROWS = 32


def executions_put_back(rules: DispatchRules) -> int:
    """Transition "put_back": for each (key, n) of `rules.put_back` (n at most
    limits.PUT_BACK_BATCH), the key's set-aside executions among its best n due ones outside
    paused queues and job types (priority, then due time: the claim's order), counting those
    already in line, go back in line. Returns how many.

    Counting the key's work already in line keeps the key's best n in line, and no more: a
    key whose put-back job was not claimed yet (the credits went elsewhere) gets no second one
    on the next dispatch, only to set both aside again once its first is sent. With forty
    tenants each limited to one job, that churn put back and set aside again 1.6 rows for
    every job sent (bench/tenants.py). A job already in line ranks before a set-aside one of
    the same priority and due time. Of the key's work in line, at most IN_LINE_PROBE_ROWS
    rows are read, in execution_key_line's order (queue, job type), not the claim's (no index
    has a key's rows in line in that order): a key with more in line is one whose flood is
    still being set aside, a batch per dispatch, and counting only some of its rows can only
    put back more, never hold back a row that ranks within its room.

    A key's set-aside work is read line by line, a line being its work of one queue and one
    job type (execution_set_aside's order): the lines are found by skipping through the index
    one (queue, job type) at a time, and a paused one is never read. Filtered row by row, a
    key's work set aside before its queue was paused was read by every dispatch until the
    resume (10.9 ms with 50,000 of it, bench/dispatch_rules.py)."""
    assert_in_transaction("executions_put_back")
    if not rules.put_back:
        return 0
    table = JobExecution._meta.db_table
    (source,) = TRANSITIONS["put_back"].sources
    aside = f"status = {rows.status_literal(source)} AND set_aside"
    in_line = f"status = {rows.status_literal(source)} AND NOT set_aside"
    keys, counts = zip(*rules.put_back, strict=True)
    read = 1 << (max(counts) - 1).bit_length()
    # Each line is read with a constant LIMIT (the largest count rounded up to a power of
    # two: a few statements, each with its own plan) and the key's rows cut to its count
    # afterwards: with the count as the LIMIT the planner could not tell how many rows would
    # be read, and chose to read and sort every set-aside row (16 ms a dispatch with one key's
    # 50,000). No FOR UPDATE: dispatches take turns (flow.lock_dispatch), and the UPDATE checks
    # the row again once it has it (a cancel meanwhile leaves it alone). The UPDATE gets the
    # rows as an array of ids, read through the primary key: joined to `back` instead, the
    # generic plan hashed `back` and scanned the table's set-aside rows to match them whenever
    # the table was small (bench/tenants.py, auto_explain: 1.1-3.8 ms a put-back at the mean,
    # 0.5-0.7 ms with the array, pg_stat_statements).
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH RECURSIVE room(key, n) AS (
                SELECT * FROM unnest(%s::text[], %s::int[])
            ),
            {_key_lines(table, aside, "room")},
            aside_best AS (
                SELECT lines.key, line.id, line.priority, line.next_run_at
                FROM lines CROSS JOIN LATERAL (
                    SELECT id, priority, next_run_at FROM {table}
                    WHERE {aside} AND concurrency_key = lines.key
                        AND queue_name = lines.queue_name AND job_type = lines.job_type
                        AND next_run_at <= clock_timestamp()
                    ORDER BY priority DESC, next_run_at
                    LIMIT {int(read)}
                ) AS line
                WHERE lines.queue_name <> ALL(%s) AND lines.job_type <> ALL(%s)
            ),
            line_best AS (
                SELECT room.key, NULL::uuid AS id, line.priority, line.next_run_at
                FROM room CROSS JOIN LATERAL (
                    SELECT priority, next_run_at FROM {table}
                    WHERE {in_line} AND concurrency_key = room.key
                        AND next_run_at <= clock_timestamp()
                        AND queue_name <> ALL(%s) AND job_type <> ALL(%s)
                    -- execution_key_line's order, so that index is the plan: with a quiet
                    -- line's statistics, the key was looked for through the whole line
                    -- (execution_queue_line) instead.
                    ORDER BY concurrency_key, queue_name, job_type
                    LIMIT {max(int(read), IN_LINE_PROBE_ROWS)}
                ) AS line
            ),
            back AS (
                SELECT best.id, room.n, row_number() OVER (
                    PARTITION BY room.key
                    ORDER BY best.priority DESC, best.next_run_at, best.id IS NOT NULL
                ) AS nth
                FROM (SELECT * FROM aside_best UNION ALL SELECT * FROM line_best) AS best
                JOIN room USING (key)
            )
            UPDATE {table} AS e SET set_aside = false
            WHERE e.id = ANY(ARRAY(SELECT id FROM back WHERE nth <= n AND id IS NOT NULL))
                AND e.{aside}
            """,
            [list(keys), list(counts), *_paused(rules), *_paused(rules)],
        )
        moved = cursor.rowcount
    if moved:
        metrics.count_on_commit(lambda: metrics.TRANSITIONS.labels("put_back").inc(moved))
    return moved


def _key_lines(table: str, condition: str, keys: str) -> str:
    """The recursive CTE `lines(key, queue_name, job_type)`: for each key of the CTE `keys`
    (a column `key`), the (queue, job type) pairs of its executions that meet `condition`,
    found by skipping through an index that starts with (concurrency_key, queue_name,
    job_type) one pair at a time: a probe per pair, however many rows each holds."""
    return f"""lines(key, queue_name, job_type) AS (
                SELECT {keys}.key, first.queue_name, first.job_type
                FROM {keys} CROSS JOIN LATERAL (
                    SELECT queue_name, job_type FROM {table}
                    WHERE {condition} AND concurrency_key = {keys}.key
                    ORDER BY queue_name, job_type LIMIT 1
                ) AS first
                UNION ALL
                SELECT lines.key, later.queue_name, later.job_type
                FROM lines CROSS JOIN LATERAL (
                    SELECT queue_name, job_type FROM {table}
                    WHERE {condition} AND concurrency_key = lines.key
                        AND (queue_name, job_type) > (lines.queue_name, lines.job_type)
                    ORDER BY queue_name, job_type LIMIT 1
                ) AS later
            )"""


def _paused(rules: DispatchRules) -> tuple[list[str], list[str]]:
    return list(rules.paused_queues), list(rules.paused_job_types)


def _due_per_open_line(
    table: str,
    waiting: str,
    line: str,
    limit: int,
    *,
    look_ahead: int,
    due_in_line: str,
    filters: str,
) -> str:
    """The claim's `due` rows while a queue or a job type is paused (`line`: the rows
    `due_in_line` and through `filters`). Its parameters, in order: `due_in_line`'s, the
    paused queues and job types, `filters`', `line`'s, the paused again, `line`'s again.

    First a look down the one line: its best `look_ahead` due rows, whatever they are, without
    locks; so it reads at most that many rows, whatever is paused or held back by `filters`
    (a key at its limit). If the open ones among them are enough (or the line has no more),
    those are the best open rows there are, and the claim takes them (one locked meanwhile by
    someone else is skipped, not replaced: the claim takes fewer, the next dispatch the rest).

    Otherwise paused work fills the top of the line, and the waiting work is read line by line,
    a line being one queue's work of one job type: the lines that have waiting executions,
    found by skipping through execution_queue_line one (queue, job type) at a time, then up to
    `limit` due rows of each open line in its own order, and the best `limit` of those. A
    paused line is never read there, however long its backlog: filtered out of the one line,
    50,000 paused rows ahead of the first open one were read on every claim
    (bench/dispatch_rules.py: 9.6 ms for a paused queue, 9.8 ms for a paused job type, 28 ms
    for both). Read on every claim, the lines cost a probe and a short read each: 8.8-10.3 ms
    with 1,000 queues waiting while an empty queue was paused, 2.4 ms since the look.

    Which way is taken is decided once per claim (`enough`, a one-time filter): the other is
    never executed. The rows of each open line beyond the best `limit` stay locked until the
    claim commits, still PENDING. The skips are `ORDER BY … LIMIT 1` over a row comparison,
    which the planner can only answer from the index, whatever its statistics say."""
    return f"""look AS MATERIALIZED (
                SELECT id, queue_name, job_type, concurrency_key FROM {table}
                WHERE {due_in_line}
                ORDER BY priority DESC, next_run_at
                LIMIT {int(look_ahead)}
            ),
            look_open AS MATERIALIZED (
                SELECT id FROM look
                WHERE queue_name <> ALL(%s) AND job_type <> ALL(%s) {filters}
            ),
            enough(ok) AS MATERIALIZED (
                SELECT (SELECT count(*) FROM look_open) >= {int(limit)}
                    OR (SELECT count(*) FROM look) < {int(look_ahead)}
            ),
            lines(queue_name, job_type) AS (
                (
                    SELECT queue_name, job_type FROM {table}
                    WHERE status = {waiting} AND NOT set_aside
                    ORDER BY queue_name, job_type LIMIT 1
                )
                UNION ALL
                SELECT later.queue_name, later.job_type FROM lines CROSS JOIN LATERAL (
                    SELECT queue_name, job_type FROM {table}
                    WHERE status = {waiting} AND NOT set_aside
                        AND (queue_name, job_type) > (lines.queue_name, lines.job_type)
                    ORDER BY queue_name, job_type LIMIT 1
                ) AS later
            ),
            due AS (
                SELECT * FROM (
                    {line} AND id IN (SELECT id FROM look_open) AND (SELECT ok FROM enough)
                    ORDER BY priority DESC, next_run_at
                    LIMIT {int(limit)}
                    FOR UPDATE SKIP LOCKED
                ) AS looked
                UNION ALL
                SELECT * FROM (
                    SELECT line.* FROM (
                        SELECT queue_name, job_type FROM lines
                        WHERE NOT (SELECT ok FROM enough)
                            AND queue_name <> ALL(%s) AND job_type <> ALL(%s)
                    ) AS open CROSS JOIN LATERAL (
                        {line} AND queue_name = open.queue_name AND job_type = open.job_type
                        ORDER BY priority DESC, next_run_at
                        LIMIT {int(limit)}
                        FOR UPDATE SKIP LOCKED
                    ) AS line
                    ORDER BY line.priority DESC, line.next_run_at
                    LIMIT {int(limit)}
                ) AS by_line
            )"""


# --- transitions driven by the worker that holds the fencing token ----------------------------


class Started(NamedTuple):
    """What the executor needs of an execution it has just started (`execution_start`)."""

    attempt: int
    job_type: str
    instruction: dict
    trace_id: str
    traceparent: str
    timeout_seconds: int


# `Started`'s fields as `execution_move` reads them, then the start's wait for the metric.
_STARTED_READING = (
    "moved.attempt_count, j.job_type, j.instruction, j.trace_id, j.traceparent, "
    "j.timeout_seconds, GREATEST(EXTRACT(EPOCH FROM moved.started_at - moved.dispatched_at), 0)"
)


def execution_start(
    *, job_id: uuid.UUID, event_id: uuid.UUID, worker_id: str, record: Step
) -> Started | None:
    """DISPATCHED → RUNNING for the holder of `event_id` on executor `worker_id`, starting the
    attempt's lease, together with `record` (the attempt's row: ledger.attempt_open_step) in
    one statement; None when the token is stale (nothing changes)."""
    row = _worker_move(
        "start",
        job_id=job_id,
        event_id=event_id,
        assignments="started_at = clock.now, worker_id = %s, "
        "attempt_count = e.attempt_count + 1, lease_expires_at = clock.now + %s",
        params=[worker_id, seconds(settings.JOBWEAVER_LEASE_SECONDS)],
        steps=[record],
        reading=_STARTED_READING,
    )
    if row is None:
        return None
    *fields, waited = row
    started = Started(*fields)
    if isinstance(started.instruction, str):  # jsonb arrives as text, as JSONField reads it
        started = started._replace(instruction=json.loads(started.instruction))
    metrics.count_on_commit(lambda: metrics.START_WAIT.observe(float(waited)))
    return started


def execution_heartbeat(*, job_id: uuid.UUID, event_id: uuid.UUID) -> bool:
    """Extend the lease of a RUNNING attempt (transition "heartbeat"); False tells the worker
    its token is stale or the job was asked to cancel, so it must stop.

    The one transition made without a row lock: it changes only the lease, is the hot path of
    every running attempt, and a conditional UPDATE on status and token is atomic by itself.
    """
    (running,) = TRANSITIONS["heartbeat"].sources
    extended = JobExecution.objects.filter(
        job_id=job_id, current_event_id=event_id, status=running, cancel_requested=False
    ).update(
        lease_expires_at=DatabaseNow() + seconds(settings.JOBWEAVER_LEASE_SECONDS),
        updated_at=DatabaseNow(),
    )
    return extended == 1


def execution_should_stop(*, job_id: uuid.UUID, event_id: uuid.UUID) -> bool:
    """True when the attempt holding `event_id` should stop: cancellation was requested or the
    token is no longer current (a cheap indexed read, polled by running attempts)."""
    return not JobExecution.objects.filter(
        job_id=job_id, current_event_id=event_id, status=S.RUNNING, cancel_requested=False
    ).exists()


def execution_complete(*, job_id: uuid.UUID, event_id: uuid.UUID, record: Step) -> bool:
    """RUNNING → COMPLETED for the holder of `event_id`, with a JobCompleted event and `record`
    (the attempt's ending: ledger.attempt_close_step) in one statement; False when the token
    is stale (nothing changes)."""
    completed = outbox_enqueue_step(
        topic=JOB_COMPLETED,
        key="moved.job_id::text",
        # The fields and formats of the Python-built events (`iso`: UTC, milliseconds, "Z").
        payload="jsonb_build_object('jobId', moved.job_id::text, 'eventId', %s::text, "
        "'traceId', j.trace_id, 'attempt', moved.attempt_count, 'completedAt', "
        "to_char(moved.db_now AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'))",
        trace_id="j.trace_id",
        from_sql=f"FROM moved JOIN {Job._meta.db_table} j ON j.id = moved.job_id",
        params=[str(event_id)],
    )
    execution = _worker_move(
        "complete",
        job_id=job_id,
        event_id=event_id,
        assignments="finished_at = clock.now, lease_expires_at = NULL, last_error = ''",
        params=[],
        steps=[completed, record],
    )
    if execution is None:
        return False
    relay_after_commit()
    return True


def execution_fail(
    *, job_id: uuid.UUID, event_id: uuid.UUID, error: str, retryable: bool
) -> RetryDecision | None:
    """A failed attempt of the holder of `event_id`: → PENDING with backoff, → FAILED (dead
    letter), or → CANCELLED when a cancel was requested. None when the token is stale."""
    execution = _lock(job_id, event_id=event_id)
    if execution is None or not allows(execution, "retry"):
        return None
    return _fail(execution, actor=Actor.WORKER, error=error, retryable=retryable)


def _fail(execution: JobExecution, *, actor: Actor, error: str, retryable: bool) -> RetryDecision:
    """The failure decision for a locked, live execution (worker failure or lost lease). The
    retry decision and the JobFailed / DeadLetterEvent events commit together with it. A job
    whose cancellation was requested ends CANCELLED instead: it is never retried automatically.
    """
    now = execution.db_now
    if execution.cancel_requested:
        _end_cancelled(execution, actor=actor, reason=f"cancelled ({error})")
        return RetryDecision(retry=False, retry_count=execution.retry_count, reason="cancelled")
    decision = policy_from_settings().decide(
        retry_count=execution.retry_count,
        max_retries=execution.max_retries,
        retryable=retryable,
        now=now,
    )
    job_id, trace_id = str(execution.job_id), execution.job.trace_id
    failed = {
        "jobId": job_id,
        "eventId": str(execution.current_event_id),
        "traceId": trace_id,
        "attempt": execution.attempt_count,
        "error": error,
        "retryable": retryable,
        "willRetry": decision.retry,
        "failedAt": iso(now),
    }
    changes = {
        "last_error": error,
        "retry_count": decision.retry_count,
        "lease_expires_at": None,
        "current_event_id": None,
    }
    if decision.retry:
        failed["nextRunAt"] = iso(decision.next_run_at)
        _apply(
            execution,
            "retry",
            actor=actor,
            changes={**changes, "next_run_at": decision.next_run_at},
            events=((JOB_FAILED, failed),),
        )
        return decision
    dead_letter = {
        "jobId": job_id,
        "traceId": trace_id,
        "reason": f"{decision.reason}: {error}",
        "finalRetryCount": decision.retry_count,
        "attempts": execution.attempt_count,
        "failedAt": iso(now),
    }
    _apply(
        execution,
        "dead_letter",
        actor=actor,
        changes={**changes, "finished_at": now},
        events=((JOB_FAILED, failed), (JOB_DEAD_LETTER, dead_letter)),
    )
    metrics.count_on_commit(metrics.JOBS_DEAD_LETTERED.inc)
    logger.warning(
        "job %s dead-lettered after %d attempt(s): %s", job_id, execution.attempt_count, error
    )
    return decision


def execution_end_cancelled(*, job_id: uuid.UUID, event_id: uuid.UUID) -> bool:
    """RUNNING (cancel requested) → CANCELLED for the holder of `event_id`; False when the
    token is stale or no cancel was requested."""
    execution = _lock(job_id, event_id=event_id)
    if execution is None or not allows(execution, "end_cancelled"):
        return False
    if not execution.cancel_requested:
        return False
    _end_cancelled(execution, actor=Actor.WORKER)
    return True


def _end_cancelled(execution: JobExecution, *, actor: Actor, reason: str = "cancelled") -> None:
    # Clearing the token fences off whoever still holds it.
    _apply(
        execution,
        "end_cancelled",
        actor=actor,
        changes={
            "current_event_id": None,
            "lease_expires_at": None,
            "finished_at": execution.db_now,
            "last_error": reason,
        },
    )


def execution_release(*, job_id: uuid.UUID, event_id: uuid.UUID) -> bool:
    """RUNNING → PENDING for the holder of `event_id` whose worker is shutting down: due at
    once, retry count unchanged (the job did not fail). False when the token is stale or a
    cancel was requested (the caller then records the cancellation instead)."""
    execution = _lock(job_id, event_id=event_id)
    if execution is None or not allows(execution, "release") or execution.cancel_requested:
        return False
    _apply(
        execution,
        "release",
        actor=Actor.WORKER,
        changes={
            "next_run_at": execution.db_now,
            "current_event_id": None,
            "lease_expires_at": None,
        },
    )
    return True


# --- the rescuer: leases that expired ---------------------------------------------------------


def execution_lose(execution: JobExecution, *, error: str) -> RetryDecision:
    """The RUNNING attempt of a locked execution was lost (its lease expired): the failure
    decision, as for a failed attempt. The caller locked the row (`executions_lock_expired`)."""
    return _fail(execution, actor=Actor.RESCUER, error=error, retryable=True)


def executions_lock_expired(
    *, limit: int, expired_by: datetime | None = None, job_ids: list[uuid.UUID] | None = None
) -> list[JobExecution]:
    """Up to `limit` DISPATCHED or RUNNING executions whose lease expired, locked with FOR
    UPDATE SKIP LOCKED: a row locked right now (its worker is recording an outcome) is skipped
    and looked at again next time. `expired_by` replaces the database clock (tests)."""
    assert_in_transaction("executions_lock_expired")
    expired = (
        JobExecution.objects.select_for_update(skip_locked=True, of=("self",))
        .select_related("job")
        .annotate(db_now=DatabaseNow())
        .filter(
            status__in=(S.DISPATCHED, S.RUNNING),
            lease_expires_at__lt=expired_by if expired_by is not None else DatabaseNow(),
        )
    )
    if job_ids is not None:
        expired = expired.filter(job_id__in=job_ids)
    return list(expired.order_by("lease_expires_at")[:limit])


def execution_redeliver(execution: JobExecution) -> JobExecution:
    """DISPATCHED → PENDING for a locked execution whose dispatch lease expired: due at once,
    token cleared (a late message is fenced off), no attempt, no retry used; counted."""
    metrics.count_on_commit(metrics.JOBS_REDELIVERED.inc)
    return _apply(
        execution,
        "redeliver",
        actor=Actor.RESCUER,
        changes={
            "next_run_at": execution.db_now,
            "current_event_id": None,
            "lease_expires_at": None,
            "worker_id": "",
            "redelivery_count": execution.redelivery_count + 1,
        },
    )


def executions_unsend(event_ids: list[uuid.UUID]) -> int:
    """The publish of these deliveries failed after their claim committed: DISPATCHED →
    PENDING at once (transition "redeliver"), fenced by their tokens, so a message that did
    reach Kafka after all is ignored. Returns how many moved."""
    assert_in_transaction("executions_unsend")
    (source,) = TRANSITIONS["redeliver"].sources
    moved = JobExecution.objects.filter(status=source, current_event_id__in=event_ids).update(
        status=TRANSITIONS["redeliver"].target,
        next_run_at=DatabaseNow(),
        current_event_id=None,
        lease_expires_at=None,
        worker_id="",
        redelivery_count=F("redelivery_count") + 1,
        version=F("version") + 1,
        updated_at=DatabaseNow(),
    )
    if moved:
        notify_dispatch()
        metrics.count_on_commit(lambda: metrics.JOBS_REDELIVERED.inc(moved))
        metrics.count_on_commit(lambda: metrics.TRANSITIONS.labels("redeliver").inc(moved))
    return moved


def executions_hold(event_ids: list[uuid.UUID]) -> int:
    """Transition "hold": renew the dispatch lease of deliveries an executor has received and
    will start when a slot frees, so waiting behind long jobs is never taken for a loss."""
    if not event_ids:
        return 0
    (source,) = TRANSITIONS["hold"].sources
    return JobExecution.objects.filter(status=source, current_event_id__in=event_ids).update(
        lease_expires_at=DatabaseNow() + seconds(settings.JOBWEAVER_DISPATCH_TIMEOUT_SECONDS)
    )


def executions_recall(*, queue_names: list[str] = (), job_types: list[str] = ()) -> int:
    """Transition "recall" for every DISPATCHED execution of these queues or job types (a pause):
    back to PENDING before any worker starts it. A worker that already locked one to start it
    wins (it is RUNNING once this statement gets the row, and is left to finish). Returns how
    many moved."""
    assert_in_transaction("executions_recall")
    transition = TRANSITIONS["recall"]
    (source,) = transition.sources
    scope = Q(queue_name__in=list(queue_names)) | Q(job_type__in=list(job_types))
    moved = JobExecution.objects.filter(scope, status=source).update(
        status=transition.target,
        current_event_id=None,
        lease_expires_at=None,
        worker_id="",
        version=F("version") + 1,
        updated_at=DatabaseNow(),
    )
    if moved:
        notify_dispatch()  # their credits are free for other work
        metrics.count_on_commit(lambda: metrics.TRANSITIONS.labels("recall").inc(moved))
    return moved


# --- operator actions ---------------------------------------------------------------------------


def _lock_or_404(job_id: uuid.UUID) -> JobExecution:
    execution = _lock(job_id)
    if execution is None:
        raise JobNotFound(f"Job {job_id} not found", job_id=job_id)
    return execution


def execution_retry(*, job_id: uuid.UUID) -> JobExecution:
    """FAILED | CANCELLED → PENDING with a fresh retry budget; the attempt history stays."""
    execution = _lock_or_404(job_id)
    if not allows(execution, "operator_retry"):
        raise InvalidStateTransition(
            f"Job {job_id} is {execution.status}; only FAILED or CANCELLED jobs can be retried",
            job_id=job_id,
        )
    return _apply(
        execution,
        "operator_retry",
        actor=Actor.OPERATOR,
        changes={
            "retry_count": 0,
            "next_run_at": execution.db_now,
            "current_event_id": None,
            "lease_expires_at": None,
            "cancel_requested": False,
            "finished_at": None,
        },
    )


def execution_cancel(*, job_id: uuid.UUID) -> JobExecution:
    """PENDING | DISPATCHED → CANCELLED at once (a message still in flight is fenced off);
    RUNNING → cancel requested (the worker stops at its next checkpoint)."""
    execution = _lock_or_404(job_id)
    if allows(execution, "cancel"):
        return _apply(
            execution,
            "cancel",
            actor=Actor.OPERATOR,
            changes={
                "current_event_id": None,
                "lease_expires_at": None,
                "finished_at": execution.db_now,
                "last_error": "cancelled",
            },
        )
    if allows(execution, "request_cancel"):
        return _apply(
            execution, "request_cancel", actor=Actor.OPERATOR, changes={"cancel_requested": True}
        )
    raise InvalidStateTransition(
        f"Job {job_id} is {execution.status}; it cannot be cancelled", job_id=job_id
    )


def execution_run_now(*, job_id: uuid.UUID) -> JobExecution:
    """A PENDING job waiting for its runAt or its backoff delay becomes due at once (database
    clock); a job that is already due, or not PENDING, is left alone."""
    execution = _lock_or_404(job_id)
    if not allows(execution, "run_now"):
        raise InvalidStateTransition(
            f"Job {job_id} is {execution.status}; only PENDING jobs can be run now", job_id=job_id
        )
    if execution.next_run_at <= execution.db_now:
        raise InvalidStateTransition(f"Job {job_id} is already due", job_id=job_id)
    return _apply(
        execution, "run_now", actor=Actor.OPERATOR, changes={"next_run_at": execution.db_now}
    )
