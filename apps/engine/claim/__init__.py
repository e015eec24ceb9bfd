"""The claim and its rules: what the dispatcher may send now, and the claim that sends it.

A part of its own that the engine's core calls (like Oban's Smart engine or River's pilot):
`credits` (how much the live executors may be sent), `rules` (pauses and per-key limits), and
here the claim itself — PENDING → DISPATCHED for the best due rows within the credits and the
rules — with the set-aside and put-back that keep keys at their limit out of the claim's line.
`queues` (a cap per queue and the share of each queue in a pool's credits). Every move goes
through the engine's mover (transitions "dispatch", "set_aside", "put_back").

The keys the claim counts are scoped to their job's owner, or shared by every owner under a
global limit (apps/engine/keys.py): `execution_keys` scopes a submit's keys, `limits_lock`
and `executions_rekey` keep the stored keys in that form when the limits change.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from jobweaver.conf import settings
from jobweaver.core.db import assert_in_transaction
from jobweaver.engine.claim import rules as claim_rules
from jobweaver.engine.claim.queues import Share
from jobweaver.engine.claim.rules import NO_RULES, DispatchRules, Limit
from jobweaver.engine.mover import move_set
from jobweaver.engine.store import claim as claim_rows
from jobweaver.engine.store import executions as execution_rows
from jobweaver.engine.store import keys as key_rows
from jobweaver.engine.transitions import Actor

DISPATCH_CHANNEL = execution_rows.DISPATCH_CHANNEL
PAUSE_CHANNEL = execution_rows.PAUSE_CHANNEL
DISPATCH_LOCK_KEY = claim_rows.DISPATCH_LOCK_KEY


class Claim(NamedTuple):
    """One execution claimed for dispatch."""

    job_id: uuid.UUID
    event_id: uuid.UUID
    trace_id: str  # the job's, carried by its run_job message and into the executor's logs
    waited_seconds: float  # from due (next_run_at) to dispatched, on the database clock
    queue_name: str


class Claims(list):
    """The claims of one `executions_claim`, in dispatch order (a list of `Claim`).

    `left_for_limits`: rows the claim read and left PENDING because their key (or their user,
    under the per-user running cap) had used its allowance in this claim. Its window of `limit`
    rows may be full of one key's work while other keys wait below: the dispatcher claims again
    once those keys are blocked, and set aside, rather than leave its credits unspent."""

    left_for_limits: int = 0


def lock_dispatch(*, planned: bool = False) -> None:
    """Serialize dispatchers (beat tick, submit fast path, wake-ups) for one transaction, and
    set its planner settings (`planned`: a claim's, generic plans too)."""
    assert_in_transaction("lock_dispatch")
    claim_rows.lock_dispatch(planned=planned)


def notify_dispatch() -> None:
    """Wake the dispatcher when this transaction commits (NOTIFY is transactional)."""
    execution_rows.notify_dispatch()


def notify_pauses() -> None:
    """Tell the executors, when this transaction commits, that the pauses changed: one that
    holds accepted deliveries of a paused queue or job type gives them back (§15)."""
    execution_rows.notify_pauses()


# --- keys per owner, shared under a global limit (§17) ------------------------------------------


def _key_scopes() -> list[Limit]:
    """The limits as far as the form of keys goes (none unless one is global), read after
    the key scopes lock, in a statement of its own (one that waited for the lock would read
    the limits as they were before the change it waited for)."""
    return [Limit(pattern, None, None, is_global) for pattern, is_global in key_rows.limit_scopes()]


def execution_keys(jobs: list) -> list[str | None]:
    """The scoped keys (apps/engine/keys.py) of new jobs' executions, in their order: inside
    the submit transaction. Reads nothing when no job has a key; otherwise it takes the key
    scopes lock (shared: submits never wait for each other) and reads the limits once, so a
    change of the limits either sees this submit's executions and re-keys them, or is seen."""
    if all(job.concurrency_key is None for job in jobs):
        return [None] * len(jobs)
    assert_in_transaction("execution_keys")
    key_rows.key_scopes_lock(exclusive=False)
    return claim_rules.scoped_keys(
        [(job.submitted_by_id, job.concurrency_key) for job in jobs], _key_scopes()
    )


def limits_lock() -> None:
    """Before the limits change: the key scopes lock, exclusive (the submits that read the
    limits commit first, and those after read the new ones), then the dispatch lock (no
    dispatch counts keys half re-keyed). Inside the change's transaction."""
    assert_in_transaction("limits_lock")
    key_rows.key_scopes_lock(exclusive=True)
    claim_rows.lock_dispatch(planned=False)


def executions_rekey(
    *, pattern: str | None = None, job_ids: list[uuid.UUID] | None = None
) -> dict[uuid.UUID, str]:
    """The unfinished executions whose user's key matches `pattern` (after its limit was set,
    changed scope or was removed, under `limits_lock`), or those of `job_ids` (an operator's
    retry brought them back: the limits may have changed since they finished), take the form
    of key the limits decide now: shared when the key's most specific limit is global, their
    owner's otherwise. Returns the new keys of those that changed, by job id."""
    assert_in_transaction("executions_rekey")
    if job_ids is not None:
        key_rows.key_scopes_lock(exclusive=False)
    patterns, precedences, global_flags = claim_rules.sharing_patterns(_key_scopes())
    return dict(
        key_rows.executions_rekey(
            patterns=patterns,
            precedences=precedences,
            global_flags=global_flags,
            user_like=claim_rules.like_pattern(pattern) if pattern is not None else None,
            job_ids=job_ids,
        )
    )


def executions_claim(
    *,
    limit: int,
    job_ids: list[uuid.UUID] | None = None,
    due_by: datetime | None = None,
    rules: DispatchRules = NO_RULES,
    workers: list[str] | None = None,
    planned: bool = False,
    queues: list[str] | None = None,
    shares: Sequence[Share] | None = None,
    pool: Sequence[str] = (),
) -> Claims:
    """Transition "dispatch" for up to `limit` due executions, highest priority first: one
    statement that claims (FOR UPDATE SKIP LOCKED, so concurrent dispatchers never take the same
    row), gives each a fresh fencing token and starts its dispatch lease. `due_by` replaces the
    database clock for "due" (tests).

    `workers` (credits.assign's choice for the first, second, … delivery) records in the same
    statement which executor the n-th claim is sent to; flow control counts its credits by it.
    `rules` leave paused queues and job types and keys at a limit out, and take at most a key's
    allowance of the rows found. `queues` (the queues the claiming executors serve) leaves every
    other queue's work waiting; `shares` (claim.queues.shares, two or more) takes the work of
    several open queues each within its room, shared between them by weight and their work in
    flight on the executors of `pool` (worker ids). A claim of the
    line (no `job_ids`) sets the claim's planner settings first, unless the caller did with its
    lock (`planned`)."""
    assert_in_transaction("executions_claim")
    assert workers is None or len(workers) >= limit, "a worker for every claim"
    claimed = move_set(
        "dispatch",
        actor=Actor.DISPATCHER,
        statement=lambda transition: claim_rows.executions_claim(
            transition,
            limit=limit,
            job_ids=job_ids,
            due_by=due_by,
            rules=rules,
            workers=workers,
            planned=planned,
            dispatch_lease_seconds=settings.JOBWEAVER_DISPATCH_TIMEOUT_SECONDS,
            queues=queues,
            shares=shares,
            pool=pool,
        ),
    )
    claims = Claims(
        Claim(job_id, event_id, trace_id, float(waited), queue_name)
        for _, job_id, event_id, trace_id, waited, queue_name, _ in claimed
    )
    if claimed:
        limited = rules.allowances or rules.user_cap
        claims.left_for_limits = claimed[0][-1] - len(claimed) if limited else 0
    return claims


def executions_set_aside(rules: DispatchRules, *, batch: int) -> int:
    """Transition "set_aside" for up to `batch` waiting executions of the keys at their limit
    that have work in line: out of the claim's line, still PENDING. Work of a paused queue or
    job type stays in line (the claim does not read a paused line), so what is set aside is
    what the key's room alone holds back. Returns how many."""
    assert_in_transaction("executions_set_aside")
    return move_set(
        "set_aside",
        actor=Actor.DISPATCHER,
        statement=lambda transition: claim_rows.executions_set_aside(
            transition, rules, batch=batch
        ),
    )


def executions_put_back(rules: DispatchRules) -> int:
    """Transition "put_back": for each (key, n) of `rules.put_back`, the key's set-aside
    executions among its best n due ones outside paused queues and job types (the claim's
    order), counting those already in line, go back in line. Counting the key's work in line
    keeps its best n in line and no more, so a key is not put back and set aside again on
    every dispatch. Returns how many."""
    assert_in_transaction("executions_put_back")
    return move_set(
        "put_back",
        actor=Actor.DISPATCHER,
        statement=lambda transition: claim_rows.executions_put_back(transition, rules),
    )
