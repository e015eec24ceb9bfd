"""Pauses and per-key limits: the rules the claim obeys (ARCHITECTURE §4a).

Flow control decides how much may be sent (the executors' credits); these rules decide what may
not be sent now, whatever the credits:
- a paused queue or job type (`Pause`): none of its waiting work is claimed;
- a concurrency limit (`ConcurrencyLimit`), per key pattern: at most `max_running` of one key's
  jobs DISPATCHED or RUNNING at once, and at most `max_per_second` of them sent in any second;
  a key is its owner's (two users' "customer-42" are two keys) unless its limit is global
  (every owner's jobs of it are one key): the keys the claim reads are scoped so
  (apps/engine/keys.py), and a limit's pattern matches them as its `key_pattern`;
- the per-user running cap (§17, off by default): at most JOBWEAVER_MAX_RUNNING_JOBS_PER_USER of
  one user's jobs DISPATCHED or RUNNING at once, operators exempt; so one user's flood cannot
  take every slot.

They are enforced where work leaves PostgreSQL, under the dispatch lock (claim.lock_dispatch),
so they hold across every executor and every scheduler: a limit is global, not per worker
(unlike Celery's rate limits). Over-limit work simply stays PENDING, in its place in line.

How a claim applies a limit: keys already at a limit are left out of the claim's scan
(`blocked_keys`), so they cannot crowd other work out of a batch; for keys with room left, the
claim takes at most that many of each key (`allowances`, matched in SQL with LIKE, the most
specific entry first). `plan` is pure; `dispatch_rules` reads what it needs (one small query
per claimed batch, two when a limit is set, one more when the per-user running cap is).

A blocked key's waiting work is also taken out of the claim's line (set aside,
`JobExecution.set_aside`), a batch per dispatch, and its best rows are put back in line when the
key has room again (`put_back_counts`). Left in line, a flood of one key ahead of the open work
was read row by row by every claim, however few of its rows the limit let through. A set-aside
row keeps its status (PENDING) and its place: put back, it is claimed in the order it would have
been. The claim reads only rows in line; finding the keys that have rows set aside costs one
index probe per such key.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from jobweaver.conf import settings
from jobweaver.engine import keys
from jobweaver.engine.store import claim as claim_rows
from jobweaver.jobs.models import Job
from jobweaver.scheduler.models import PauseScope

# The window of `max_per_second`.
RATE_WINDOW_SECONDS = 1.0
# Precedence of an allowance computed for one key from its current use: above any pattern's
# (a pattern's is at most twice the column's 255 characters, plus one).
EXACT_KEY_PRECEDENCE = 1_000_000
# At most this many waiting rows of blocked keys are set aside by one dispatch (a flood is set
# aside over a few dispatches, none of which holds the dispatch lock for long), and at most this
# many of one key's set-aside rows are put back by one (a key without a bound, e.g. after its
# limit was removed, goes back in line a batch at a time, ahead of what the claim can take).
SET_ASIDE_BATCH = 500
PUT_BACK_BATCH = 100
# The room of a user the per-user running cap exempts (an operator): more than any claim takes.
UNCAPPED_ROOM = 2**31 - 1
# Holders of this permission (app label, codename) are exempt from the per-user running cap.
OPERATOR_PERMISSION = (Job._meta.app_label, "operate_all_jobs")


@dataclass(frozen=True)
class Limit:
    """A ConcurrencyLimit: `pattern` is the user's (as set), matched against the executions'
    scoped keys (jobweaver.engine.keys) as `key_pattern`: per owner, each owner's key on its
    own; `is_global`, every owner's jobs of a key as one key."""

    pattern: str
    max_running: int | None
    max_per_second: int | None
    is_global: bool = False

    @property
    def key_pattern(self) -> str:
        return keys.key_pattern(self.pattern, is_global=self.is_global)

    @property
    def precedence(self) -> int:
        """The most specific (longest) user pattern first; of two as long, the global one."""
        return 2 * len(self.pattern) + int(self.is_global)


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
    # The per-user running cap (JOBWEAVER_MAX_RUNNING_JOBS_PER_USER, 0: none): users at it are
    # left out of the claim's scan; a user with work in flight has the room in `user_rooms`,
    # any other user may have up to `user_cap` of their jobs claimed at once.
    user_cap: int = 0
    blocked_users: tuple[int, ...] = ()
    user_rooms: tuple[tuple[int, int], ...] = ()

    def for_given_jobs(self) -> DispatchRules:
        """The rules of a claim of a few given jobs (the fast path after a submit), which puts
        nothing back: a key with work set aside is blocked there, so a new job cannot overtake
        its key's older work; the next full dispatch gives that back first."""
        if not self.put_back:
            return self
        waiting_aside = tuple(key for key, _ in self.put_back)
        return replace(self, blocked_keys=self.blocked_keys + waiting_aside, put_back=())


NO_RULES = DispatchRules()


def glob_matches(pattern: str, key: str) -> bool:
    """`*` matches any run of characters (none included); everything else matches itself.

    Without backtracking (ARCHITECTURE §17): the pieces between the stars are found in order,
    each at its leftmost place after the one before, which is enough when `*` is the only
    wildcard. A regex made of the pattern backtracked exponentially on keys like 200 a's
    against `*a*a*a*a*!`, under the global dispatch lock."""
    first, *middle_and_last = pattern.split("*")
    if not middle_and_last:
        return key == pattern
    *middle, last = middle_and_last
    if len(first) + len(last) > len(key) or not (key.startswith(first) and key.endswith(last)):
        return False
    position, end = len(first), len(key) - len(last)
    for piece in middle:
        found = key.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def like_pattern(pattern: str, *, exact: bool = False) -> str:
    """The SQL LIKE (escape character backslash) that matches what `glob_matches` matches; with
    `exact`, `*` is a literal character too."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped if exact else escaped.replace("*", "%")


def limit_for(key: str, limits: list[Limit]) -> Limit | None:
    """The limit of an execution's (scoped) `key`: of the limits matching it, the one of the
    highest precedence; None: the key is unlimited."""
    matching = [limit for limit in limits if glob_matches(limit.key_pattern, key)]
    return max(matching, key=lambda limit: limit.precedence, default=None)


def shared_by_limits(key: str, limits: list[Limit]) -> bool:
    """Whether the user's `key` is shared by all owners: the limit of the highest precedence
    among those whose pattern matches it is global. Its executions then carry the shared form
    (keys.scoped_key(…, shared=True)), which only then a global limit's pattern matches."""
    matching = [limit for limit in limits if glob_matches(limit.pattern, key)]
    winner = max(matching, key=lambda limit: limit.precedence, default=None)
    return winner is not None and winner.is_global


def scoped_keys(owners_and_keys: list[tuple[int | None, str | None]], limits: list[Limit]):
    """The keys executions carry for (owner id, the user's key or None) pairs, in order."""
    return [
        None if key is None else keys.scoped_key(owner, key, shared=shared_by_limits(key, limits))
        for owner, key in owners_and_keys
    ]


def sharing_patterns(limits: list[Limit]) -> tuple[list[str], list[int], list[bool]]:
    """What `shared_by_limits` decides from, for SQL: each limit's user pattern as a LIKE, its
    precedence and whether it is global (a re-key's statement picks the first by precedence)."""
    return (
        [like_pattern(limit.pattern) for limit in limits],
        [limit.precedence for limit in limits],
        [limit.is_global for limit in limits],
    )


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
        Allowance(like_pattern(limit.key_pattern), room, limit.precedence)
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


def plan_users(cap: int, usage: list) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """From the cap and each busy user's (user id, in flight, exempt): the users at the cap, and
    (user id, room) for the others. An exempt user (an operator) gets UNCAPPED_ROOM."""
    blocked, rooms = [], []
    for user_id, running, exempt in sorted(usage):
        room = UNCAPPED_ROOM if exempt else max(cap - running, 0)
        if room == 0:
            blocked.append(user_id)
        else:
            rooms.append((user_id, room))
    return tuple(blocked), tuple(rooms)


# --- what the claim reads ------------------------------------------------------------------


def _usage(rows) -> tuple[dict[str, tuple[int, int]], set[str]]:
    usage = {key: (running, sent) for key, running, sent, _ in rows}
    return usage, {key for key, _, _, waiting in rows if waiting}


def dispatch_rules(rows: list | None = None) -> DispatchRules:
    """The rules for one claim, read inside the dispatch transaction: one query for the pauses,
    the limits (both tables are small) and whether anything is set aside (`rules_sql`; its
    `rows` when the caller read them already); then, only when a limit is set or something is
    set aside, the keys' use and the keys with work set aside."""
    if rows is None:
        rows = claim_rows.rules()
    queues = tuple(name for scope, name, _, _ in rows if scope == PauseScope.QUEUE)
    job_types = tuple(name for scope, name, _, _ in rows if scope == PauseScope.JOB_TYPE)
    anything_aside = any(name for scope, name, _, _ in rows if scope == claim_rows.SET_ASIDE_SCOPE)
    limits = [
        Limit(name, running, per_second, scope == claim_rows.GLOBAL_LIMIT_SCOPE)
        for scope, name, running, per_second in rows
        if scope in (None, claim_rows.GLOBAL_LIMIT_SCOPE)
    ]
    aside = claim_rows.keys_set_aside() if anything_aside else []
    rates = any(limit.max_per_second is not None for limit in limits)
    usage, in_line = (
        _usage(claim_rows.key_usage(rates=rates, rate_window_seconds=RATE_WINDOW_SECONDS))
        if limits or aside
        else ({}, set())
    )
    blocked, allowances = plan(limits, usage) if limits else ((), ())
    put_back = put_back_counts(limits, usage, aside) if aside else ()
    set_aside_now = tuple(key for key in blocked if key in in_line)
    user_cap = settings.JOBWEAVER_MAX_RUNNING_JOBS_PER_USER
    blocked_users, user_rooms = (
        plan_users(user_cap, claim_rows.user_usage(operator_permission=OPERATOR_PERMISSION))
        if user_cap
        else ((), ())
    )
    return DispatchRules(
        queues,
        job_types,
        blocked,
        allowances,
        put_back,
        set_aside_now,
        user_cap,
        blocked_users,
        user_rooms,
    )
