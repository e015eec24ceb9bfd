"""The dispatcher's claim and its rules, in SQL: the credits of the live executors, the pauses,
the limits, the claim itself (PENDING → DISPATCHED), and the set-aside and put-back of keys at
their limit (apps/engine/claim/ decides what to ask; these statements do it).

The claim's line is the partial index of PENDING rows in line (not set aside) by priority and
due time. Statements read indexes in their own order and stop at a limit (ORDER BY … LIMIT),
which statistics cannot turn into a scan of the table; values that are the same for every call
(statuses, limits, leases from settings) are written into the text, so each shape has one plan.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection

from jobweaver.engine.store import named
from jobweaver.engine.store.executions import _moving
from jobweaver.engine.transitions import Transition
from jobweaver.scheduler.models import (
    ConcurrencyLimit,
    ExecutionStatus,
    ExecutorRegistration,
    JobExecution,
    Pause,
    Queue,
    live_registration,
    status_literal,
)

DISPATCH_LOCK_KEY = 0x4A_57_44_53  # "JWDS": one dispatcher at a time, cluster-wide
# How far down the one line a claim looks while something is paused, before it reads the line
# per queue and job type (`_due_per_open_line`).
LOOK_AHEAD_ROWS = 32
# How many of a key's rows in line `executions_put_back` reads to rank its set-aside work.
IN_LINE_PROBE_ROWS = 32
# What counts against credits and caps: executions dispatched or running.
_IN_FLIGHT = (
    f"{status_literal(ExecutionStatus.DISPATCHED)}, {status_literal(ExecutionStatus.RUNNING)}"
)
# The scope of the rules query's rows that name a key with rows set aside (not a Pause scope).
SET_ASIDE_SCOPE = "SET_ASIDE"
# The scope of its rows of global limits (a per-owner limit's is NULL).
GLOBAL_LIMIT_SCOPE = "GLOBAL_LIMIT"

# Planner settings for the rest of a dispatch transaction (set_config(…, true) is local to it):
# without bitmap scans, which cannot skip the dead index entries every job leaves behind, and
# with one generic plan per statement (bench/NOTES.md). Without sequential scans of the queue's
# tables either: a plan is kept for as long as the connection, and one made while the table
# was nearly empty (a new deployment, a new database) read the whole of it on every dispatch
# once it had grown, until the next ANALYZE (the credits' count of the work in flight did,
# for every dispatch of a `make bench` round; bench/NOTES.md).
INDEX_SCANS = (
    "set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)"
)
GENERIC_PLANS = "set_config('plan_cache_mode', 'force_generic_plan', true)"


class Allowance(Protocol):
    like: str
    count: int
    precedence: int


class Share(Protocol):
    """What the claim reads of jobweaver.engine.claim.queues.Share."""

    name: str
    weight: int
    room: int


class Rules(Protocol):
    """What the claim's statements read of jobweaver.engine.claim.rules.DispatchRules."""

    user_cap: int
    blocked_users: tuple[int, ...]
    user_rooms: tuple[tuple[int, int], ...]
    paused_queues: tuple[str, ...]
    paused_job_types: tuple[str, ...]
    blocked_keys: tuple[str, ...]
    allowances: tuple[Allowance, ...]
    put_back: tuple[tuple[str, int], ...]
    set_aside_now: tuple[str, ...]


@named("pg_advisory_xact_lock the dispatch, and set its planner settings for the transaction")
def lock_dispatch(*, planned: bool) -> None:
    """`planned`: a full dispatch also gets the claim's settings here (one round trip less)."""
    planner = f"{INDEX_SCANS}, {GENERIC_PLANS}" if planned else INDEX_SCANS
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_advisory_xact_lock(%s), {planner}", [DISPATCH_LOCK_KEY])


@named("set the planner settings of a claim of the line for the rest of its transaction")
def dispatch_planning() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {INDEX_SCANS}, {GENERIC_PLANS}")


@named("SELECT the live executors' credits, the rules' first rows and the queues' settings")
def credits_and_rules(
    *, prefetch: int, prefetch_max: int, ttl_seconds: float
) -> tuple[list, list, list]:
    """Credits as [worker_id, free, partitions, queues], rules as [scope,
    name, max_running, max_per_second], queues as [name, max_running, weight, in flight (when
    capped)]. Read after the dispatch lock, in a statement of its own: a statement that
    waited for the lock would not see the claims of the dispatch it waited for."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT
                (SELECT json_agg(json_build_array(c.worker_id, c.free, c.partitions, c.queues)
                                 ORDER BY c.worker_id)
                 FROM ({_credits_sql(prefetch, prefetch_max, ttl_seconds)}) AS c),
                (SELECT json_agg(json_build_array(r.scope, r.name, r.max_running,
                                                  r.max_per_second))
                 FROM ({rules_sql()}) AS r),
                (SELECT json_agg(json_build_array(q.name, q.max_running, q.weight, q.in_flight))
                 FROM ({_queues_sql()}) AS q)
            """
        )
        credit_rows, rule_rows, queue_rows = cursor.fetchone()
    return credit_rows or [], rule_rows or [], queue_rows or []


@functools.lru_cache(maxsize=1)
def _queues_sql() -> str:
    """The queues' settings; for a capped queue, its executions dispatched or running on any
    executor, live or not (they count until the rescue takes them back)."""
    executions = JobExecution._meta.db_table
    return f"""
        SELECT s.name, s.max_running, s.weight,
            CASE WHEN s.max_running IS NOT NULL THEN (
                SELECT count(*) FROM {executions} e
                WHERE e.status IN ({_IN_FLIGHT}) AND e.queue_name = s.name
            ) END AS in_flight
        FROM {Queue._meta.db_table} s
        """


@named("SELECT the live executors' free credits: (worker_id, free, partitions, …) by worker id")
def credits(*, prefetch: int, prefetch_max: int, ttl_seconds: float) -> list:
    with connection.cursor() as cursor:
        cursor.execute(_credits_sql(prefetch, prefetch_max, ttl_seconds))
        return cursor.fetchall()


@functools.lru_cache(maxsize=8)
def _credits_sql(prefetch: int, prefetch_max: int, ttl_seconds: float) -> str:
    """The credits' SQL with its values (settings, never input) and the statuses written in:
    one generic plan, not a custom plan per call (bench/NOTES.md)."""
    registrations = ExecutorRegistration._meta.db_table
    executions = JobExecution._meta.db_table
    return f"""
        SELECT r.worker_id,
            r.slots * {window_prefetch_sql("r", prefetch, prefetch_max)}
                - COALESCE(f.in_flight, 0) AS free,
            r.partitions, r.queues
        FROM {registrations} r
        LEFT JOIN (
            SELECT worker_id, count(*) AS in_flight FROM {executions}
            WHERE status IN ({_IN_FLIGHT})
            GROUP BY worker_id
        ) f USING (worker_id)
        WHERE r.{live_registration(ttl_seconds)}
          AND jsonb_array_length(r.partitions) > 0
        ORDER BY r.worker_id
        """


def window_prefetch_sql(alias: str, prefetch: int, prefetch_max: int) -> str:
    """An executor registration's prefetch, as it reported it (NULL: an executor of an earlier
    version), within this process's bounds."""
    return f"LEAST(GREATEST(COALESCE({alias}.prefetch, 0), {int(prefetch)}), {int(prefetch_max)})"


@functools.lru_cache(maxsize=1)
def rules_sql() -> str:
    """Rows of (scope, name, max_running, max_per_second) for the pauses, the limits (scope
    NULL per owner, GLOBAL_LIMIT global; name the user's pattern) and the first key with work
    set aside (scope SET_ASIDE; name NULL when none)."""
    table = JobExecution._meta.db_table
    return f"""
        SELECT scope, name, NULL::int AS max_running, NULL::int AS max_per_second
        FROM {Pause._meta.db_table}
        UNION ALL
        SELECT CASE WHEN is_global THEN '{GLOBAL_LIMIT_SCOPE}' END, pattern, max_running,
            max_per_second
        FROM {ConcurrencyLimit._meta.db_table}
        UNION ALL
        SELECT '{SET_ASIDE_SCOPE}', ({_FIRST_KEY_SET_ASIDE.format(table=table, after="")}),
            NULL, NULL
        """


@named("SELECT the pauses, the limits and whether any work is set aside")
def rules() -> list:
    with connection.cursor() as cursor:
        cursor.execute(rules_sql())
        return cursor.fetchall()


# The first key (after `after`) with work set aside: one probe of jw_execution_set_aside, ORDER BY …
# LIMIT 1 rather than min(), which stale statistics made read the whole index.
_FIRST_KEY_SET_ASIDE = (
    f"SELECT concurrency_key FROM {{table}} WHERE status = '{ExecutionStatus.PENDING.value}' "
    "AND set_aside {after} ORDER BY concurrency_key LIMIT 1"
)


@named("SELECT per key its executions in flight, sent within the rate window, and if it waits")
def key_usage(*, rates: bool, rate_window_seconds: float) -> list:
    """Rows of (key, in flight, sent in the window, has work in line). Each count reads its
    own index; without `rates` the window is not read at all."""
    table = JobExecution._meta.db_table
    counts = [
        f"SELECT concurrency_key, 1 AS running, 0 AS sent FROM {table} "
        "WHERE concurrency_key IS NOT NULL AND status IN ('DISPATCHED', 'RUNNING')"
    ]
    if rates:
        # The window starts at statement_timestamp(), a stable function the planner can use to
        # bound the scan of jw_execution_key_dispatched (bench/NOTES.md).
        since = f"statement_timestamp() - make_interval(secs => {float(rate_window_seconds)!r})"
        counts.append(
            f"SELECT concurrency_key, 0, 1 FROM {table} "
            f"WHERE concurrency_key IS NOT NULL AND dispatched_at > {since}"
        )
    # Whether a key has work in line: a probe in jw_execution_key_line's order, ORDER BY … LIMIT 1
    # rather than EXISTS, which stale statistics turned into a scan of the table.
    in_line = (
        f"(SELECT w.queue_name FROM {table} w WHERE w.concurrency_key = used.concurrency_key "
        f"AND w.status = '{ExecutionStatus.PENDING.value}' AND NOT w.set_aside "
        "ORDER BY w.queue_name, w.job_type LIMIT 1) IS NOT NULL"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT used.concurrency_key, sum(used.running), sum(used.sent), {in_line}
            FROM ({" UNION ALL ".join(counts)}) AS used
            GROUP BY used.concurrency_key
            """
        )
        return cursor.fetchall()


@named("SELECT per user with work in flight: how much, and whether an operator (cap exempt)")
def user_usage(*, operator_permission: tuple[str, str]) -> list:
    """Rows of (user id, executions in flight, exempt) for the per-user running cap. The work
    in flight is few rows (flow control), read through jw_execution_live_leases; a user is
    exempt as a holder of `operator_permission` (app label, codename), directly or by a group,
    or as an active superuser (Django's ModelBackend's answer)."""
    table = JobExecution._meta.db_table
    users = get_user_model()
    own = users._meta.get_field("user_permissions").remote_field.through._meta
    membership = users._meta.get_field("groups").remote_field.through._meta
    granted = Group._meta.get_field("permissions").remote_field.through._meta
    permission = f"""(SELECT p.id FROM {Permission._meta.db_table} p
        JOIN {ContentType._meta.db_table} ct ON ct.id = p.content_type_id
        WHERE ct.app_label = %(app)s AND p.codename = %(codename)s)"""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT f.user_id, f.running, u.is_active AND (
                u.is_superuser
                OR EXISTS (SELECT 1 FROM {own.db_table} o
                           WHERE o.user_id = u.id AND o.permission_id IN {permission})
                OR EXISTS (SELECT 1 FROM {membership.db_table} m
                           JOIN {granted.db_table} g ON g.group_id = m.group_id
                           WHERE m.user_id = u.id AND g.permission_id IN {permission})
            )
            FROM (
                SELECT submitted_by_id AS user_id, count(*) AS running FROM {table}
                WHERE status IN ({_IN_FLIGHT}) AND submitted_by_id IS NOT NULL
                GROUP BY submitted_by_id
            ) f JOIN {users._meta.db_table} u ON u.id = f.user_id
            """,
            {"app": operator_permission[0], "codename": operator_permission[1]},
        )
        return cursor.fetchall()


@named("SELECT the keys with work set aside, skipping through jw_execution_set_aside key by key")
def keys_set_aside() -> list[str]:
    table = JobExecution._meta.db_table
    first = _FIRST_KEY_SET_ASIDE.format(table=table, after="")
    following = _FIRST_KEY_SET_ASIDE.format(table=table, after="AND concurrency_key > aside.key")
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH RECURSIVE aside(key) AS (
                SELECT ({first})
                UNION ALL
                SELECT ({following}) FROM aside WHERE aside.key IS NOT NULL
            )
            SELECT key FROM aside WHERE key IS NOT NULL
            """
        )
        return [key for (key,) in cursor.fetchall()]


@named("UPDATE PENDING → DISPATCHED the best due rows in line (FOR UPDATE SKIP LOCKED), tokens")
def executions_claim(
    transition: Transition,
    *,
    limit: int,
    job_ids: list[uuid.UUID] | None,
    due_by: datetime | None,
    rules: Rules,
    workers: list[str] | None,
    planned: bool,
    dispatch_lease_seconds: float,
    queues: list[str] | None = None,
    shares: Sequence[Share] | None = None,
    pool: Sequence[str] = (),
) -> list[tuple]:
    """Rows (n, job_id, event_id, trace_id, waited seconds, queue, rows read) in claim order.

    `shares` (two or more open queues of a pool, apps/engine/claim/queues.py): the claim takes
    each queue's work up to its room, shared between the queues by weight and their work in
    flight on the `pool`'s executors (`_due_shared`); then `queues` and the paused queues are
    not read."""
    assert workers is None or len(workers) >= limit, "a worker for every claim"
    (source,) = transition.sources
    # In line and due: the rows a claim may take, before its filters.
    waiting = status_literal(source)
    due_in_line = (
        f"status = {waiting} AND NOT set_aside AND next_run_at <= "
        f"{'%s' if due_by is not None else 'clock_timestamp()'}"
    )
    # With a queue or a job type paused, the claim looks a few rows down the line, and reads
    # it per queue and job type when paused work fills them (`_due_per_open_line`): filtered
    # out of the one line, a paused backlog ahead of the rest was read on every claim.
    by_line = bool(rules.paused_queues or rules.paused_job_types) and job_ids is None and not shares
    due_params = [due_by] if due_by is not None else []
    filters = [("AND job_id = ANY(%s)", job_ids)] if job_ids is not None else []
    if queues is not None and not shares:  # shares read each queue's line on its own
        # Only work of the queues the claiming executors serve (ARCHITECTURE §15).
        filters.append(("AND queue_name = ANY(%s)", queues))
    filters += [
        (clause, values)
        for clause, values in (
            ("AND queue_name <> ALL(%s)", () if by_line or shares else rules.paused_queues),
            ("AND job_type <> ALL(%s)", () if by_line else rules.paused_job_types),
            ("AND (concurrency_key IS NULL OR concurrency_key <> ALL(%s))", rules.blocked_keys),
            ("AND (submitted_by_id IS NULL OR submitted_by_id <> ALL(%s))", rules.blocked_users),
        )
        if values
    ]
    scan_filters = " ".join(clause for clause, _ in filters)
    filter_params = [list(values) for _, values in filters]
    line_params = [*due_params, *filter_params]
    table = JobExecution._meta.db_table
    line = f"""
            SELECT id, priority, next_run_at, submitted_by_id, concurrency_key FROM {table}
            WHERE {due_in_line} {scan_filters}
            """
    if shares:
        due, params = _due_shared(
            table,
            shares,
            limit,
            pool=pool,
            line=line.replace("concurrency_key FROM", "concurrency_key, queue_name FROM"),
            line_params=line_params,
            by_ids=job_ids is not None,
            due_in_line=due_in_line,
            due_params=due_params,
            job_types=_open_job_types(rules.paused_job_types),
        )
    elif by_line:
        due = _due_per_open_line(
            table,
            waiting,
            line,
            limit,
            look_ahead=LOOK_AHEAD_ROWS,
            due_in_line=due_in_line,
            filters=scan_filters,
        )
        # `_due_per_open_line`'s parameters in the order of its text: the look down the line
        # (the due time), what of it is open (the paused, the filters), the claim of that (the
        # line's), the open lines (the paused) and the claim line by line (the line's).
        paused = [list(rules.paused_queues), list(rules.paused_job_types)]
        params = [*due_params, *paused, *filter_params, *line_params, *paused, *line_params]
    else:
        due = f"""due AS (
                {line}
                ORDER BY priority DESC, next_run_at
                LIMIT {int(limit)}
                FOR UPDATE SKIP LOCKED
            )"""
        params = list(line_params)
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
    within_user_rooms = ""
    if rules.user_cap:
        # A user's n-th row in claim order is taken while n is within their room.
        within_user_rooms = f""",
            user_ranked AS (
                SELECT id, submitted_by_id, row_number() OVER (
                    PARTITION BY submitted_by_id ORDER BY priority DESC, next_run_at
                ) AS nth
                FROM due
            ),
            user_allowed AS (
                SELECT id FROM user_ranked
                WHERE submitted_by_id IS NULL OR nth <= COALESCE((
                    SELECT r.room FROM unnest(%s::int[], %s::int[]) AS r(user_id, room)
                    WHERE r.user_id = user_ranked.submitted_by_id
                ), {int(rules.user_cap)})
            )"""
        params += [[user for user, _ in rules.user_rooms], [room for _, room in rules.user_rooms]]
    params.append(workers or [])
    dispatch_lease = float(dispatch_lease_seconds)
    jobs = JobExecution._meta.get_field("job").related_model._meta.db_table
    # The statuses, the limit and the dispatch lease are written in, not passed: one plan
    # per limit, not a custom plan per call (bench/NOTES.md).
    if job_ids is None and not planned:
        dispatch_planning()
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH {"RECURSIVE " if by_line else ""}{due}{within_allowances}{within_user_rooms},
            numbered AS (
                SELECT due.id, row_number() OVER (ORDER BY due.priority DESC, due.next_run_at)
                    AS n
                FROM due {"JOIN allowed USING (id)" if rules.allowances else ""}
                    {"JOIN user_allowed USING (id)" if rules.user_cap else ""}
            )
            UPDATE {table} AS e
            SET {_moving(transition, "clock_timestamp()")},
                current_event_id = gen_random_uuid(),
                worker_id = COALESCE((%s::text[])[numbered.n], e.worker_id),
                dispatched_at = clock_timestamp(), accepted = false,
                lease_expires_at = clock_timestamp() + make_interval(secs => {dispatch_lease!r})
            FROM numbered, {jobs} AS j WHERE e.id = numbered.id AND j.id = e.job_id
            RETURNING numbered.n, e.job_id, e.current_event_id, j.trace_id,
                GREATEST(EXTRACT(EPOCH FROM e.dispatched_at - e.next_run_at), 0), e.queue_name,
                {"(SELECT count(*) FROM due)" if rules.allowances or rules.user_cap else "0"}
            """,
            params,
        )
        claimed = cursor.fetchall()
    claimed.sort()
    return claimed


@named("UPDATE set_aside for a batch of the waiting work of keys at their limit, by line")
def executions_set_aside(transition: Transition, rules: Rules, *, batch: int) -> int:
    if not rules.set_aside_now:
        return 0
    table = JobExecution._meta.db_table
    (source,) = transition.sources
    in_line = f"status = {status_literal(source)} AND NOT set_aside"
    # Lines found in the index's own order and read by equality on its three columns: plans
    # that stale statistics cannot turn into a scan of the table (bench/NOTES.md).
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
            UPDATE {table} AS e SET {_moving(transition, "clock_timestamp()")}, set_aside = true
            WHERE e.id = ANY(ARRAY(SELECT id FROM held))
            """,
            [list(rules.set_aside_now), *_paused(rules)],
        )
        moved = cursor.rowcount
    return moved


@named("UPDATE set_aside back off for each key's best set-aside rows within its room")
def executions_put_back(transition: Transition, rules: Rules) -> int:
    if not rules.put_back:
        return 0
    table = JobExecution._meta.db_table
    (source,) = transition.sources
    aside = f"status = {status_literal(source)} AND set_aside"
    in_line = f"status = {status_literal(source)} AND NOT set_aside"
    keys, counts = zip(*rules.put_back, strict=True)
    read = 1 << (max(counts) - 1).bit_length()
    # Each line is read with a constant LIMIT (the largest count rounded up to a power of two)
    # and cut to the key's count afterwards, so the planner knows how many rows it reads; no
    # FOR UPDATE: dispatches take turns (lock_dispatch) and the UPDATE checks each row again.
    # The UPDATE gets the rows as an array of ids, read through the primary key
    # (bench/NOTES.md).
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
                    -- jw_execution_key_line's order, so that index is the plan: with a quiet
                    -- line's statistics, the key was looked for through the whole line
                    -- (jw_execution_queue_line) instead.
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
            UPDATE {table} AS e SET {_moving(transition, "clock_timestamp()")}, set_aside = false
            WHERE e.id = ANY(ARRAY(SELECT id FROM back WHERE nth <= n AND id IS NOT NULL))
                AND e.{aside}
            """,
            [list(keys), list(counts), *_paused(rules), *_paused(rules)],
        )
        moved = cursor.rowcount
    return moved


def _open_job_types(paused: tuple[str, ...]) -> list[str]:
    job_type = JobExecution._meta.get_field("job").related_model._meta.get_field("job_type")
    return [value for value, _ in job_type.choices if value not in paused]


def _due_shared(
    table: str,
    shares: Sequence[Share],
    limit: int,
    *,
    pool: Sequence[str],
    line: str,
    line_params: list,
    by_ids: bool,
    due_in_line: str,
    due_params: list,
    job_types: list[str],
) -> tuple[str, list]:
    """The claim's `due` rows and their parameters when a pool's credits are shared between
    queues (apps/engine/claim/queues.py): each queue's best rows up to its room, chosen in
    the order of (its work in flight + n - 1) / its weight for its n-th row, so that the slots
    fill in proportion to the weights and a queue with nothing due takes none.

    Each (queue, job type) line is read on its own through jw_execution_queue_line, so no
    queue's backlog is read for another; the chosen rows are then locked (SKIP LOCKED: a row
    another transaction holds is left for the next claim). `line` selects the queue too."""
    # Each queue's work in flight on the pool's executors, counted here, only for a shared
    # claim: the credits statement of every dispatch stays a count per executor.
    shares_sql = f"""shares(queue_name, weight, room, in_flight) AS (
                SELECT s.*, (
                    SELECT count(*) FROM {table} f
                    WHERE f.status IN ({_IN_FLIGHT}) AND f.queue_name = s.queue_name
                        AND f.worker_id = ANY(%s)
                ) FROM unnest(%s::text[], %s::int[], %s::int[]) AS s(queue_name, weight, room)
            )"""
    share_params = [
        list(pool),
        [share.name for share in shares],
        [share.weight for share in shares],
        [share.room for share in shares],
    ]
    if by_ids:
        # A few given jobs (the submit's fast path): read by id, not line by line.
        candidates = (
            f"SELECT * FROM ({line}) AS line WHERE queue_name IN (SELECT queue_name FROM shares)"
        )
        candidate_params = list(line_params)
    else:
        candidates = f"""SELECT line.* FROM shares CROSS JOIN unnest(%s::text[]) AS open(job_type)
                CROSS JOIN LATERAL (
                    {line} AND queue_name = shares.queue_name AND job_type = open.job_type
                    ORDER BY priority DESC, next_run_at
                    LIMIT {int(limit)}
                ) AS line"""
        candidate_params = [job_types, *line_params]
    due = f"""{shares_sql},
            candidates AS (
                SELECT c.id, c.queue_name, c.priority, c.next_run_at, row_number() OVER (
                    PARTITION BY c.queue_name ORDER BY c.priority DESC, c.next_run_at
                ) AS nth
                FROM ({candidates}) AS c
            ),
            chosen AS (
                SELECT c.id FROM candidates c JOIN shares s USING (queue_name)
                WHERE c.nth <= s.room
                ORDER BY (s.in_flight + c.nth - 1)::float8 / s.weight, s.weight DESC,
                    c.priority DESC, c.next_run_at
                LIMIT {int(limit)}
            ),
            due AS (
                SELECT id, priority, next_run_at, submitted_by_id, concurrency_key FROM {table}
                WHERE id = ANY(ARRAY(SELECT id FROM chosen)) AND {due_in_line}
                FOR UPDATE SKIP LOCKED
            )"""
    return due, [*share_params, *candidate_params, *due_params]


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


def _paused(rules: Rules) -> tuple[list[str], list[str]]:
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

    First a look down the one line: its best `look_ahead` due rows, without locks. If the open
    ones among them are enough (or the line has no more), the claim takes them. Otherwise paused
    work fills the top of the line, and the waiting work is read line by line (one queue's work
    of one job type, found by skipping through jw_execution_queue_line), so a paused line is never
    read, however long its backlog (bench/NOTES.md). Which way is taken is decided once per
    claim (`enough`, a one-time filter); the other is never executed."""
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
