"""The operator's actions (API, admin, CLI): retry, cancel and run now on executions; pause and
resume a queue or job type; set and remove concurrency limits; set a queue's cap and weight.

Each is one transaction around a transition of the engine (apps/engine/executions.py); a retried
job is dispatched right after commit. What pauses and limits mean for dispatch:
apps/engine/claim/rules.py.
"""

from __future__ import annotations

import logging
import time
import uuid

from django.db import transaction

from jobweaver.core.db import DatabaseNow
from jobweaver.core.errors import InvalidRequest
from jobweaver.core.names import checked_key, checked_queue_name
from jobweaver.engine import claim, executions
from jobweaver.scheduler.dispatch import dispatch_job_now
from jobweaver.scheduler.models import (
    QUEUE_MAX_RUNNING_RANGE,
    QUEUE_WEIGHT_RANGE,
    ConcurrencyLimit,
    JobExecution,
    Pause,
    PauseScope,
    Queue,
)

logger = logging.getLogger(__name__)

MAX_LIMIT_VALUE = 1_000_000
# How long a pause waits, after its commit, for the executors to give back the deliveries of its
# work they accepted (JOBWEAVER_EXECUTOR_START_DELAY_MS): they hear of it at once; a frozen or
# cut-off one does not, and the pause returns anyway.
PAUSE_SETTLE_SECONDS = 2.0
PAUSE_SETTLE_POLL_SECONDS = 0.005


@transaction.atomic
def execution_retry(*, job_id: uuid.UUID) -> JobExecution:
    """FAILED | CANCELLED → PENDING with a fresh retry budget; the attempt history stays."""
    execution = executions.execution_retry(job_id=job_id)
    transaction.on_commit(lambda: dispatch_job_now(job_id))
    return execution


@transaction.atomic
def execution_cancel(*, job_id: uuid.UUID) -> JobExecution:
    """PENDING | DISPATCHED → CANCELLED at once; RUNNING → cancel requested (the worker stops
    at its next checkpoint and records CANCELLED). Never retried automatically."""
    return executions.execution_cancel(job_id=job_id)


@transaction.atomic
def execution_run_now(*, job_id: uuid.UUID) -> JobExecution:
    """A delayed PENDING job (runAt or backoff) becomes due at once and is dispatched after
    commit; InvalidStateTransition when it is not PENDING or already due."""
    execution = executions.execution_run_now(job_id=job_id)
    transaction.on_commit(lambda: dispatch_job_now(job_id))
    return execution


# --- pause and resume ---------------------------------------------------------------------------


def queue_pause_check(*, scope, name, reason="") -> tuple[str, str]:
    """The checks of `queue_pause` without writing anything (for a form to show its errors
    before saving): the (scope, name), or InvalidRequest."""
    if not isinstance(reason, str) or len(reason) > 200:
        raise InvalidRequest("reason must be a string of at most 200 characters")
    if scope not in PauseScope.values:
        raise InvalidRequest(f"scope must be one of {', '.join(PauseScope.values)}, got {scope!r}")
    if scope == PauseScope.QUEUE:
        return scope, checked_queue_name(name, "name")
    job_types = JobExecution._meta.get_field("job").related_model._meta.get_field("job_type")
    known = [value for value, _ in job_types.choices]
    if name not in known:
        raise InvalidRequest(f"name must be a job type ({', '.join(known)}), got {name!r}")
    return scope, name


def queue_pause(*, scope: str, name: str, reason: str = "", paused_by: str = "") -> Pause:
    """Pause a queue or a job type: once it returns, nothing more of it starts. Deliveries sent
    but not started are taken back (transition "recall"), those an executor accepted by that
    executor; running work finishes; waiting work stays PENDING. Pausing what is paused changes
    nothing and returns the pause."""
    pause, _ = queue_pause_ensure(scope=scope, name=name, reason=reason, paused_by=paused_by)
    return pause


@transaction.atomic
def queue_pause_ensure(
    *, scope: str, name: str, reason: str = "", paused_by: str = ""
) -> tuple[Pause, bool]:
    """`queue_pause`, also saying whether the pause is new (the API answers 201 or 200)."""
    scope, name = queue_pause_check(scope=scope, name=name, reason=reason)
    # Under the dispatch lock: a claim that read the rules before this pause commits first,
    # and the recall below then sees (and takes back) what it sent; later claims see the pause.
    claim.lock_dispatch()
    pause, created = Pause.objects.get_or_create(
        scope=scope,
        name=name,
        defaults={"reason": reason, "paused_by": paused_by[:150], "paused_at": DatabaseNow()},
    )
    if created:
        pause.refresh_from_db(fields=["paused_at"])
        queues, job_types = ([name], []) if scope == PauseScope.QUEUE else ([], [name])
        executions.executions_recall(queue_names=queues, job_types=job_types)
        # The recall leaves the deliveries executors accepted (one may run already): the
        # executors give back those still in line when they hear of the pause.
        claim.notify_pauses()
        transaction.on_commit(lambda: _await_accepted_given_back(queues, job_types))
    return pause, created


def _await_accepted_given_back(queues: list[str], job_types: list[str]) -> None:
    """After a pause's commit: wait until no delivery of its work is accepted any more (each
    given back, started or ended), PAUSE_SETTLE_SECONDS at most."""
    deadline = time.monotonic() + PAUSE_SETTLE_SECONDS
    while left := executions.executions_accepted_count(queue_names=queues, job_types=job_types):
        if time.monotonic() >= deadline:
            logger.warning(
                "pause of %s: %d accepted deliveries not given back within %.0f s (their "
                "executor is frozen or cut off); they may still start",
                ", ".join(queues + job_types),
                left,
                PAUSE_SETTLE_SECONDS,
            )
            return
        time.sleep(PAUSE_SETTLE_POLL_SECONDS)


@transaction.atomic
def queue_resume(*, scope: str, name: str) -> bool:
    """Resume a paused queue or job type: its waiting work is dispatched at once (credits
    allowing). False when it was not paused (nothing changes)."""
    scope, name = queue_pause_check(scope=scope, name=name)
    deleted, _ = Pause.objects.filter(scope=scope, name=name).delete()
    if deleted:
        claim.notify_dispatch()
        claim.notify_pauses()  # executors run what they accept of it again
    return bool(deleted)


# --- concurrency limits -------------------------------------------------------------------------


def _limit_value(value, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT_VALUE:
        raise InvalidRequest(f"{field} must be an integer from 1 to {MAX_LIMIT_VALUE}, or null")
    return value


def concurrency_limit_check(
    *, pattern, max_running, max_per_second, is_global=False
) -> tuple[str, int | None, int | None, bool]:
    """The checks of `concurrency_limit_set` without writing anything (for a form to show its
    errors before saving): the (pattern, max_running, max_per_second, is_global), or
    InvalidRequest."""
    pattern = checked_key(pattern, "pattern")
    max_running = _limit_value(max_running, "maxRunning")
    max_per_second = _limit_value(max_per_second, "maxPerSecond")
    if max_running is None and max_per_second is None:
        raise InvalidRequest("a limit needs maxRunning, maxPerSecond or both")
    if not isinstance(is_global, bool):
        raise InvalidRequest("global must be true or false")
    return pattern, max_running, max_per_second, is_global


@transaction.atomic
def concurrency_limit_set(
    *,
    pattern: str,
    max_running: int | None,
    max_per_second: int | None,
    is_global: bool = False,
) -> tuple[ConcurrencyLimit, bool]:
    """Create or replace the limit for keys matching `pattern` (`*` matches any run of
    characters); returns it and whether it is new. Applies from the next dispatch on.

    Per owner (the default), each owner's key counts on its own; `is_global`, every owner's
    jobs of a key count as one (§17: an operator's choice). A change of scope re-keys the
    waiting and running work it concerns in this transaction (claim.executions_rekey), so the
    limit holds for work submitted before it too."""
    pattern, max_running, max_per_second, is_global = concurrency_limit_check(
        pattern=pattern,
        max_running=max_running,
        max_per_second=max_per_second,
        is_global=is_global,
    )
    claim.limits_lock()
    scopes = dict(ConcurrencyLimit.objects.values_list("pattern", "is_global"))
    limit, created = ConcurrencyLimit.objects.update_or_create(
        pattern=pattern,
        defaults={
            "max_running": max_running,
            "max_per_second": max_per_second,
            "is_global": is_global,
        },
    )
    # Which limit decides a key's scope changes only with a new pattern or a new scope, and
    # only matters while some limit is global (otherwise every key is its owner's).
    if scopes.get(pattern) is not is_global and (is_global or any(scopes.values())):
        claim.executions_rekey(pattern=pattern)
    claim.notify_dispatch()  # a raised limit lets waiting work go at once
    return limit, created


@transaction.atomic
def concurrency_limit_delete(*, pattern: str) -> bool:
    """Remove the limit of `pattern`; False when there was none. While a limit is global, the
    work it concerns is re-keyed in this transaction (a global limit gone, each owner's key is
    their own again)."""
    pattern = checked_key(pattern, "pattern")
    claim.limits_lock()
    any_global = ConcurrencyLimit.objects.filter(is_global=True).exists()
    deleted, _ = ConcurrencyLimit.objects.filter(pattern=pattern).delete()
    if deleted:
        if any_global:
            claim.executions_rekey(pattern=pattern)
        claim.notify_dispatch()
    return bool(deleted)


# --- queues -------------------------------------------------------------------------------------

# A field of queue_settings_set that was not given (None is a value: no cap).
UNCHANGED = object()


def _in_range(value, field: str, bounds: tuple[int, int], *, nullable: bool) -> int | None:
    low, high = bounds
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        null = ", or null" if nullable else ""
        raise InvalidRequest(f"{field} must be an integer from {low} to {high}{null}")
    return value


def queue_settings_check(*, name, max_running=UNCHANGED, weight=UNCHANGED) -> dict:
    """The checks of `queue_settings_set` without writing anything: the fields to change, by
    model field, or InvalidRequest. 0 is no cap: pausing the queue is how to stop it."""
    checked_queue_name(name, "name")
    changes = {}
    if max_running is not UNCHANGED:
        changes["max_running"] = _in_range(
            max_running, "maxRunning", QUEUE_MAX_RUNNING_RANGE, nullable=True
        )
    if weight is not UNCHANGED:
        changes["weight"] = _in_range(weight, "weight", QUEUE_WEIGHT_RANGE, nullable=False)
    if not changes:
        raise InvalidRequest("give maxRunning, weight or both")
    return changes


@transaction.atomic
def queue_settings_set(*, name: str, max_running=UNCHANGED, weight=UNCHANGED) -> Queue:
    """Change the fields given of a queue's settings (the others stay; a queue without settings
    gets them): its cap across all executors and its weight (ARCHITECTURE §15). Applies from the
    next dispatch on, which a raised cap or a new weight wakes at once."""
    changes = queue_settings_check(name=name, max_running=max_running, weight=weight)
    queue, _ = Queue.objects.get_or_create(name=name)
    for field, value in changes.items():
        setattr(queue, field, value)
    queue.save(update_fields=[*changes, "updated_at"])  # a concurrent change of the other stays
    claim.notify_dispatch()
    return queue


@transaction.atomic
def queue_settings_delete(*, name: str) -> bool:
    """A queue back to no cap and weight 1; False when it had no settings."""
    deleted, _ = Queue.objects.filter(name=checked_queue_name(name, "name")).delete()
    if deleted:
        claim.notify_dispatch()
    return bool(deleted)
