"""Pauses and per-key limits: the rules the dispatcher's claim obeys (ARCHITECTURE §4a).

Flow control decides how much may be sent (the executors' credits); these rules decide what may
not be sent now, whatever the credits:
- a paused queue or job type (`Pause`): none of its waiting work is claimed;
- a concurrency limit (`ConcurrencyLimit`), per key pattern: at most `max_running` of one key's
  jobs DISPATCHED or RUNNING at once, and at most `max_per_second` of them sent in any second.

They are enforced where work leaves PostgreSQL, under the dispatch lock (flow.lock_dispatch), so
they hold across every executor and every scheduler: a limit is global, not per worker (unlike
Celery's rate limits). Over-limit work simply stays PENDING, in its place in line.

How a claim applies a limit: keys already at a limit are left out of the claim's scan
(`blocked_keys`), so they cannot crowd other work out of a batch; for keys with room left, the
claim takes at most that many of each key (`allowances`, matched in SQL with LIKE, the most
specific entry first). `plan` is pure; `dispatch_rules` reads what it needs (one small query
per claimed batch, two when a limit is set).

A blocked key's waiting work is also taken out of the claim's line (set aside,
`JobExecution.set_aside`), a batch per dispatch, and its best rows are put back in line when the
key has room again (`put_back_counts`). Left in line, a flood of one key ahead of the open work
was read row by row by every claim, however few of its rows the limit let through. A set-aside
row keeps its status (PENDING) and its place: put back, it is claimed in the order it would have
been. The claim reads only rows in line; finding the keys that have rows set aside costs one
index probe per such key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

from django.db import connection

from apps.core.errors import InvalidRequest
from apps.scheduler.models import (
    ConcurrencyLimit,
    ExecutionStatus,
    JobExecution,
    Pause,
    PauseScope,
)

MAX_QUEUE_NAME_CHARS = 100
MAX_CONCURRENCY_KEY_CHARS = 255
QUEUE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# The window of `max_per_second`.
RATE_WINDOW_SECONDS = 1.0
# Precedence of an allowance computed for one key from its current use: above any pattern's.
EXACT_KEY_PRECEDENCE = 1_000_000
# At most this many waiting rows of blocked keys are set aside by one dispatch (a flood is set
# aside over a few dispatches, none of which holds the dispatch lock for long), and at most this
# many of one key's set-aside rows are put back by one (a key without a bound, e.g. after its
# limit was removed, goes back in line a batch at a time, ahead of what the claim can take).
SET_ASIDE_BATCH = 500
PUT_BACK_BATCH = 100


@dataclass(frozen=True)
class Limit:
    pattern: str
    max_running: int | None
    max_per_second: int | None


@dataclass(frozen=True)
class Allowance:
    """At most `count` more jobs of a key matching the SQL LIKE `like` may be claimed now;
    where several entries match a key, the highest `precedence` applies."""

    like: str
    count: int
    precedence: int


@dataclass(frozen=True)
class DispatchRules:
    paused_queues: tuple[str, ...] = ()
    paused_job_types: tuple[str, ...] = ()
    blocked_keys: tuple[str, ...] = ()
    allowances: tuple[Allowance, ...] = ()
    # (key, how many of its set-aside rows go back in line now), for keys with room.
    put_back: tuple[tuple[str, int], ...] = ()
    # The blocked keys that have work in line: what the dispatch sets aside now. Most rounds
    # it is none (a key's work in line went aside when it was first blocked, and only its room
    # comes back), and the set-aside statement is not run.
    set_aside_now: tuple[str, ...] = ()

    def for_given_jobs(self) -> DispatchRules:
        """The rules of a claim of a few given jobs (the fast path after a submit), which puts
        nothing back: a key with work set aside is blocked there, so a new job cannot overtake
        its key's older work; the next full dispatch gives that back first."""
        if not self.put_back:
            return self
        waiting_aside = tuple(key for key, _ in self.put_back)
        return replace(self, blocked_keys=self.blocked_keys + waiting_aside, put_back=())


NO_RULES = DispatchRules()


# --- names, keys and patterns ------------------------------------------------------------------


def checked_queue_name(value, field: str = "queueName") -> str:
    """A queue's name: 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit."""
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= MAX_QUEUE_NAME_CHARS
        or not QUEUE_NAME_PATTERN.match(value)
    ):
        raise InvalidRequest(
            f"{field} must be 1-{MAX_QUEUE_NAME_CHARS} letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def checked_key(value, field: str = "concurrencyKey") -> str:
    """A concurrency key, or (field "pattern") a key pattern: 1-255 printable characters."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_CONCURRENCY_KEY_CHARS:
        raise InvalidRequest(
            f"{field} must be a string of 1-{MAX_CONCURRENCY_KEY_CHARS} characters"
        )
    if not value.isprintable():
        raise InvalidRequest(f"{field} must be printable text")
    return value


@lru_cache(maxsize=1024)
def _regex(pattern: str) -> re.Pattern:
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


def glob_matches(pattern: str, key: str) -> bool:
    """`*` matches any run of characters (none included); everything else matches itself."""
    return _regex(pattern).fullmatch(key) is not None


def like_pattern(pattern: str, *, exact: bool = False) -> str:
    """The SQL LIKE (escape character backslash) that matches what `glob_matches` matches; with
    `exact`, `*` is a literal character too."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped if exact else escaped.replace("*", "%")


def limit_for(key: str, limits: list[Limit]) -> Limit | None:
    """The most specific (longest) limit pattern matching `key`; None: the key is unlimited."""
    matching = [limit for limit in limits if glob_matches(limit.pattern, key)]
    return max(matching, key=lambda limit: len(limit.pattern), default=None)


def _room(limit: Limit, running: int, recent: int) -> int | None:
    """How many more of a key's jobs may be sent now; None: no bound."""
    rooms = []
    if limit.max_running is not None:
        rooms.append(limit.max_running - running)
    if limit.max_per_second is not None:
        rooms.append(limit.max_per_second - recent)
    return max(min(rooms), 0) if rooms else None


def plan(
    limits: list[Limit], usage: dict[str, tuple[int, int]]
) -> tuple[tuple[str, ...], tuple[Allowance, ...]]:
    """From the limits and each busy key's (in flight, sent in the last window): the keys at a
    limit, and the allowances: one per pattern for keys not busy now, one per busy key."""
    blocked: list[str] = []
    allowances = [
        Allowance(like_pattern(limit.pattern), room, len(limit.pattern))
        for limit in limits
        if (room := _room(limit, 0, 0)) is not None
    ]
    for key, (running, recent) in sorted(usage.items()):
        limit = limit_for(key, limits)
        if limit is None:
            continue
        room = _room(limit, running, recent)
        if room == 0:
            blocked.append(key)
        elif room is not None:
            allowances.append(Allowance(like_pattern(key, exact=True), room, EXACT_KEY_PRECEDENCE))
    return tuple(blocked), tuple(allowances)


def put_back_counts(
    limits: list[Limit], usage: dict[str, tuple[int, int]], set_aside_keys: list[str]
) -> tuple[tuple[str, int], ...]:
    """For each key with rows set aside, how many to put back in line now: its room under its
    limit (none while it is at it), at most PUT_BACK_BATCH; PUT_BACK_BATCH for a key no limit
    matches any more."""
    counts = []
    for key in sorted(set_aside_keys):
        limit = limit_for(key, limits)
        room = None if limit is None else _room(limit, *usage.get(key, (0, 0)))
        count = PUT_BACK_BATCH if room is None else min(room, PUT_BACK_BATCH)
        if count > 0:
            counts.append((key, count))
    return tuple(counts)


# --- what the dispatcher reads ------------------------------------------------------------------


def _key_usage(*, rates: bool) -> tuple[dict[str, tuple[int, int]], set[str]]:
    """Per concurrency key: executions in flight, and executions sent in the last window (0
    without `rates`: no limit has `max_per_second`, and the window's executions are not read);
    and which of these keys have work in line (a probe of execution_key_line each).

    Each count reads its own index: the executions in flight through execution_key_in_flight,
    the window through execution_key_dispatched. Written as one scan with an OR, the plan
    needed a bitmap scan to combine the two, and the dispatch turns bitmap scans off
    (flow.lock_dispatch): it became a scan of the table (6 ms with 70,000 executions). Without
    a rate the window is not read at all: at a few hundred jobs a second it held hundreds of
    executions, read by every dispatch to count what no limit asked for."""
    table = JobExecution._meta.db_table
    counts = [
        f"SELECT concurrency_key, 1 AS running, 0 AS sent FROM {table} "
        "WHERE concurrency_key IS NOT NULL AND status IN ('DISPATCHED', 'RUNNING')"
    ]
    if rates:
        # The window's start from statement_timestamp(), the database clock when this
        # statement began (microseconds ago). Compared with the volatile clock_timestamp()
        # itself, dispatched_at could not bound the scan of execution_key_dispatched, and every
        # execution that has a key was read (8.4 ms a dispatch with one key's 50,000 waiting).
        # A subquery bounded it, but its value is unknown to the planner, which then guessed a
        # third of the table recent and, now and then, read all of it instead (7 ms,
        # bench/dispatch_rules.py). A stable function is evaluated for the estimate.
        since = f"statement_timestamp() - make_interval(secs => {RATE_WINDOW_SECONDS})"
        counts.append(
            f"SELECT concurrency_key, 0, 1 FROM {table} "
            f"WHERE concurrency_key IS NOT NULL AND dispatched_at > {since}"
        )
    # Whether a key has work in line: a probe in execution_key_line's order, ORDER BY …
    # LIMIT 1 rather than EXISTS: right after a key's flood was set aside, statistics that
    # still said its rows were in line made EXISTS a scan of the table (4-7 ms,
    # bench/dispatch_rules.py).
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
        return _usage(cursor.fetchall())


def _usage(rows) -> tuple[dict[str, tuple[int, int]], set[str]]:
    usage = {key: (running, sent) for key, running, sent, _ in rows}
    return usage, {key for key, _, _, waiting in rows if waiting}


def dispatch_rules(rows: list | None = None) -> DispatchRules:
    """The rules for one claim, read inside the dispatch transaction: one query for the pauses,
    the limits (both tables are small) and whether anything is set aside (`rules_sql`; its
    `rows` when the caller read them already); then, only when a limit is set or something is
    set aside, the keys' use and the keys with work set aside."""
    if rows is None:
        with connection.cursor() as cursor:
            cursor.execute(rules_sql())
            rows = cursor.fetchall()
    queues = tuple(name for scope, name, _, _ in rows if scope == PauseScope.QUEUE)
    job_types = tuple(name for scope, name, _, _ in rows if scope == PauseScope.JOB_TYPE)
    anything_aside = any(name for scope, name, _, _ in rows if scope == _SET_ASIDE)
    limits = [
        Limit(name, running, per_second)
        for scope, name, running, per_second in rows
        if scope is None
    ]
    aside = _keys_set_aside() if anything_aside else []
    rates = any(limit.max_per_second is not None for limit in limits)
    usage, in_line = _key_usage(rates=rates) if limits or aside else ({}, set())
    blocked, allowances = plan(limits, usage) if limits else ((), ())
    put_back = put_back_counts(limits, usage, aside) if aside else ()
    set_aside_now = tuple(key for key in blocked if key in in_line)
    return DispatchRules(queues, job_types, blocked, allowances, put_back, set_aside_now)


@lru_cache(maxsize=1)
def rules_sql() -> str:
    """`dispatch_rules`' first query: rows of (scope, name, max_running, max_per_second) for
    the pauses, the limits (scope NULL) and the first key with work set aside (scope
    SET_ASIDE; name NULL when there is none)."""
    table = JobExecution._meta.db_table
    return f"""
        SELECT scope, name, NULL::int AS max_running, NULL::int AS max_per_second
        FROM {Pause._meta.db_table}
        UNION ALL
        SELECT NULL, pattern, max_running, max_per_second
        FROM {ConcurrencyLimit._meta.db_table}
        UNION ALL
        SELECT '{_SET_ASIDE}', ({_FIRST_KEY_SET_ASIDE.format(table=table, after="")}),
            NULL, NULL
        """


# The first key (after `after`) with work set aside: one probe of execution_set_aside. ORDER
# BY … LIMIT 1 rather than min(): right after a flood was set aside, statistics that still said
# "nothing is set aside" made min() read every entry of the index (5 ms).
_FIRST_KEY_SET_ASIDE = (
    f"SELECT concurrency_key FROM {{table}} WHERE status = '{ExecutionStatus.PENDING.value}' "
    "AND set_aside {after} ORDER BY concurrency_key LIMIT 1"
)


def _keys_set_aside() -> list[str]:
    """The keys with work set aside, skipping through execution_set_aside one key at a time.
    A query of its own, run only when something is set aside: planning the recursive query
    cost every dispatch 0.14 ms where statements are not prepared."""
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


# The scope of the rules query's rows that name a key with rows set aside (not a Pause scope).
_SET_ASIDE = "SET_ASIDE"
