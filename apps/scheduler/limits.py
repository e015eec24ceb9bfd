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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from django.db import connection

from apps.core.errors import InvalidRequest
from apps.scheduler.models import ConcurrencyLimit, JobExecution, Pause, PauseScope

MAX_QUEUE_NAME_CHARS = 100
MAX_CONCURRENCY_KEY_CHARS = 255
QUEUE_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# The window of `max_per_second`.
RATE_WINDOW_SECONDS = 1.0
# Precedence of an allowance computed for one key from its current use: above any pattern's.
EXACT_KEY_PRECEDENCE = 1_000_000


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


# --- what the dispatcher reads ------------------------------------------------------------------


def _key_usage() -> dict[str, tuple[int, int]]:
    """Per concurrency key: executions in flight, and executions sent in the last window."""
    table = JobExecution._meta.db_table
    # The window's start as a subquery, computed once per statement: compared with the volatile
    # clock_timestamp() itself, dispatched_at could not bound the scan of
    # execution_key_dispatched, and every execution that has a key was read (8.4 ms a dispatch
    # with one key's 50,000 waiting; 0.3 ms now: the executions in flight and those sent within
    # the window).
    since = f"(SELECT clock_timestamp() - make_interval(secs => {RATE_WINDOW_SECONDS}))"
    recent = f"dispatched_at > {since}"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT concurrency_key,
                count(*) FILTER (WHERE status IN ('DISPATCHED', 'RUNNING')),
                count(*) FILTER (WHERE {recent})
            FROM {table}
            WHERE concurrency_key IS NOT NULL
                AND (status IN ('DISPATCHED', 'RUNNING') OR {recent})
            GROUP BY concurrency_key
            """
        )
        return {key: (running, sent) for key, running, sent in cursor.fetchall()}


def dispatch_rules() -> DispatchRules:
    """The rules for one claim, read inside the dispatch transaction: one query for the pauses
    and limits (both tables are small), and one for the keys' use when a limit is set."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT scope, name, NULL, NULL FROM {Pause._meta.db_table}
            UNION ALL
            SELECT NULL, pattern, max_running, max_per_second
            FROM {ConcurrencyLimit._meta.db_table}
            """
        )
        rows = cursor.fetchall()
    queues = tuple(name for scope, name, _, _ in rows if scope == PauseScope.QUEUE)
    job_types = tuple(name for scope, name, _, _ in rows if scope == PauseScope.JOB_TYPE)
    limits = [
        Limit(name, running, per_second)
        for scope, name, running, per_second in rows
        if scope is None
    ]
    blocked, allowances = plan(limits, _key_usage()) if limits else ((), ())
    return DispatchRules(queues, job_types, blocked, allowances)
