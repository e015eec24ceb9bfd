"""Writes on schedules: define them, and fire the due ones. Used alike by the API, the CLI, the
admin and beat's `fire_schedules` task.

Exactly one submission per slot, even with two beats (or a retried task) firing at once:

- the fast path: a firing locks each due schedule (`FOR UPDATE SKIP LOCKED`) and advances its
  `next_run_at` in the same transaction as the submissions, so a concurrent firing skips it, or
  sees it no longer due once it commits;
- the guarantee: every slot's job carries the idempotency key `schedule:<id>:<slot UTC>`, and
  the jobs table holds one job per (submitter, key). A firing that got past the lock anyway
  (say, a schedule's `next_run_at` put back by hand) replays the slot's job instead of
  submitting a second one.

A schedule submits as its owner (§17): each job a firing submits counts against the owner's
active-jobs cap and takes a token from their submit throttle (apps/accounts/throttle.py). When
either is exhausted the slot waits: it is tried again at the next tick, `lastError` says why,
and once it is later than the misfire grace it is missed and follows the misfire policy, like a
slot missed while beat was down. Ownerless schedules (command line, code) are not throttled.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from jobweaver.accounts.selectors import holds
from jobweaver.accounts.throttle import SUBMIT, throttle_take
from jobweaver.conf import settings
from jobweaver.core.db import assert_in_transaction
from jobweaver.core.errors import (
    Forbidden,
    IdempotencyConflict,
    InvalidRequest,
    InvalidStateTransition,
    QuotaExceeded,
)
from jobweaver.jobs.selectors import OPERATE_ALL_JOBS
from jobweaver.jobs.services import HIGH_PRIORITY, job_submit
from jobweaver.jobs.validation import JobSpec
from jobweaver.schedules import slots
from jobweaver.schedules.models import Schedule, ScheduleSource
from jobweaver.schedules.periodic import Periodic, declarations
from jobweaver.schedules.selectors import schedule_to_operate
from jobweaver.schedules.validation import (
    clean_enabled,
    clean_job_template,
    clean_misfire_policy,
    clean_name,
    clean_rule,
)

logger = logging.getLogger(__name__)

UPDATABLE = (
    "cron_expression",
    "time_zone",
    "interval_seconds",
    "job_template",
    "misfire_policy",
    "enabled",
)
# What the schedule submits, and when: a user who changes any of these makes it theirs (§17).
# Pausing and resuming (`enabled`) change neither, and leave the owner as it was.
DEFINITION = frozenset(UPDATABLE) - {"enabled"}
ADD_JOB = "jobweaver_jobs.add_job"
# pg_advisory_xact_lock(namespace, user id): one count-then-insert of a user's schedules at a
# time, so concurrent creates never pass JOBWEAVER_MAX_SCHEDULES_PER_USER together.
SCHEDULE_LIMIT_LOCK_NAMESPACE = 0x4A53


def _now(now: datetime | None) -> datetime:
    return timezone.now() if now is None else now


def _first_slot(rule: slots.Rule, now: datetime) -> datetime:
    try:
        return slots.first_slot(rule, now=now)
    except slots.InvalidRule as exc:  # a cron that never matches again
        raise InvalidRequest(str(exc)) from None


def _refuse_code_schedule(schedule: Schedule) -> None:
    """A schedule declared in code changes with the code (§13a): 409 anywhere else."""
    if schedule.source == ScheduleSource.CODE:
        raise InvalidStateTransition(
            f"schedule {schedule.name!r} is declared in code (@periodic): change it there"
        )


def _check_min_interval(rule: slots.Rule, now: datetime) -> None:
    """A schedule fires at most every JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS (§17): an
    interval that long at least, and a cron whose closest two slots are that far apart."""
    minimum = settings.JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS
    closest = slots.closest_slots_seconds(rule, after=now)
    if closest >= minimum:
        return
    setting = "JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS"
    if isinstance(rule, slots.IntervalRule):
        raise InvalidRequest(
            f"intervalSeconds must be at least {minimum:g} ({setting}), got {rule.seconds}"
        )
    raise InvalidRequest(
        f"cron {rule.expression!r} fires {closest:g} s apart: a schedule may fire at most every "
        f"{minimum:g} s ({setting})"
    )


def _check_schedule_limit(owner) -> None:
    """At most JOBWEAVER_MAX_SCHEDULES_PER_USER schedules per owner (0: no limit); operators
    (jobs.operate_all_jobs) and ownerless schedules are not counted against it. Must run inside
    the transaction that adds the schedule: the lock it takes holds until that commits."""
    limit = settings.JOBWEAVER_MAX_SCHEDULES_PER_USER
    if owner is None or not limit or holds(owner, OPERATE_ALL_JOBS):
        return
    assert_in_transaction("the per-user schedule limit")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s, %s)", [SCHEDULE_LIMIT_LOCK_NAMESPACE, owner.pk]
        )
    count = Schedule.objects.filter(owner=owner).count()
    if count >= limit:
        raise InvalidRequest(
            f"{owner.get_username()} has {count} schedules, the most a user may have "
            f"(JOBWEAVER_MAX_SCHEDULES_PER_USER): delete one first"
        )


def _check_may_submit(owner) -> None:
    """A schedule submits jobs as its owner: the owner needs jobs.add_job (§17)."""
    if owner is not None and not holds(owner, ADD_JOB):
        raise Forbidden(
            f"a schedule submits jobs as its owner, which needs the {ADD_JOB} permission"
        )


def _check_template_allowed(spec: JobSpec, owner) -> None:
    """Refuse now what every firing would refuse: a priority the owner may not submit."""
    threshold = settings.JOBWEAVER_PRIORITY_PERMISSION_ABOVE
    if owner is not None and spec.priority > threshold and not holds(owner, HIGH_PRIORITY):
        raise Forbidden(f"template.priority above {threshold} needs the {HIGH_PRIORITY} permission")


@transaction.atomic
def schedule_create(
    *,
    name: str,
    job_template: Any,
    cron_expression: str | None = None,
    time_zone: str | None = None,
    interval_seconds: int | None = None,
    misfire_policy: str = slots.SKIP,
    enabled: bool = True,
    owner=None,
    now: datetime | None = None,
) -> Schedule:
    """Validate and store a schedule of `owner` (None: ownerless, the command line's); its first
    slot is the rule's first after `now`. A bad definition raises InvalidRequest (a priority
    its owner may not submit, Forbidden) and stores nothing. Names are unique per owner, and
    among the ownerless schedules."""
    name = clean_name(name)
    _check_may_submit(owner)
    rule_fields = clean_rule(
        cron_expression=cron_expression, time_zone=time_zone, interval_seconds=interval_seconds
    )
    _check_min_interval(rule_fields.rule, _now(now))
    _check_template_allowed(clean_job_template(job_template), owner)
    misfire_policy = clean_misfire_policy(misfire_policy)
    enabled = clean_enabled(enabled)
    _check_schedule_limit(owner)
    if Schedule.objects.filter(name=name, owner=owner).exists():
        raise InvalidRequest(_taken(name, owner))
    schedule = Schedule(
        name=name,
        cron_expression=rule_fields.cron_expression,
        time_zone=rule_fields.time_zone,
        interval_seconds=rule_fields.interval_seconds,
        job_template=job_template,
        misfire_policy=misfire_policy,
        enabled=enabled,
        next_run_at=_first_slot(rule_fields.rule, _now(now)) if enabled else None,
        owner=owner,
    )
    try:
        with transaction.atomic():
            schedule.save(force_insert=True)
    except IntegrityError:  # created concurrently under the same name
        raise InvalidRequest(_taken(name, owner)) from None
    logger.info("schedule %s created (%s)", name, schedule.when)
    return schedule


def _taken(name: str, owner) -> str:
    if owner is None:
        return f"a schedule named {name!r} without an owner already exists"
    return f"{owner.get_username()} already has a schedule named {name!r}"


@transaction.atomic
def schedule_update(
    *,
    name: str | None = None,
    owner: str | None = None,
    schedule_id: uuid.UUID | None = None,
    changes: dict[str, Any],
    user=None,
    now: datetime | None = None,
) -> Schedule:
    """Change some of a schedule's fields (UPDATABLE). The schedule is addressed by `name`
    (and `owner`, a username) or `schedule_id` as `schedule_get` says; another user's needs
    jobs.operate_all_jobs. A new rule, or enabling it, starts it afresh at the rule's first slot
    after `now`: slots before are not caught up. Switching between cron and interval: give the
    one, the other is cleared.

    A `user` who changes what the schedule submits or when (DEFINITION) becomes its owner: from
    then on it submits as them, so the schedule is checked as if they had created it (jobs.add_job,
    the template's priority, a name free among theirs). Otherwise an ownerless schedule (the
    command line's) would be a way around the priority permission, the cap and the throttle,
    and another user's a way to submit as them. A trusted caller (`user=None`) changes nothing
    of the ownership."""
    unknown = sorted(set(changes) - set(UPDATABLE))
    if unknown:
        raise InvalidRequest(f"cannot change: {', '.join(unknown)}")
    if "cron_expression" in changes and "interval_seconds" in changes:
        raise InvalidRequest("give exactly one of cron (with timeZone) or intervalSeconds")
    schedule = schedule_to_operate(name=name, owner=owner, schedule_id=schedule_id, user=user)
    _refuse_code_schedule(schedule)
    takes_over = user is not None and bool(DEFINITION & set(changes))
    changes_hands = takes_over and schedule.owner_id != user.pk
    if takes_over:
        _take_over(schedule, user)
    rule_changed = {"cron_expression", "time_zone", "interval_seconds"} & set(changes)
    if rule_changed:
        if "interval_seconds" in changes:
            cron, interval = None, changes["interval_seconds"]
            zone = changes.get("time_zone")
        else:
            cron = changes.get("cron_expression", schedule.cron_expression)
            interval = None if "cron_expression" in changes else schedule.interval_seconds
            zone = changes.get("time_zone", schedule.time_zone if cron is not None else None)
        rule_fields = clean_rule(cron_expression=cron, time_zone=zone, interval_seconds=interval)
        schedule.cron_expression = rule_fields.cron_expression
        schedule.time_zone = rule_fields.time_zone
        schedule.interval_seconds = rule_fields.interval_seconds
    if rule_changed or changes_hands:  # a rule an owner had before the minimum may stay theirs
        _check_min_interval(schedule.rule, _now(now))
    if "job_template" in changes or takes_over:
        template = changes.get("job_template", schedule.job_template)
        _check_template_allowed(clean_job_template(template), schedule.owner)
        schedule.job_template = template
    if "misfire_policy" in changes:
        schedule.misfire_policy = clean_misfire_policy(changes["misfire_policy"])
    enabling = False
    if "enabled" in changes:
        enabled = clean_enabled(changes["enabled"])
        enabling = enabled and not schedule.enabled
        schedule.enabled = enabled
    if not schedule.enabled:
        schedule.next_run_at = None
    elif rule_changed or enabling:
        schedule.next_run_at = _first_slot(schedule.rule, _now(now))
    try:
        with transaction.atomic():
            schedule.save()
    except IntegrityError:  # the new owner created one of that name meanwhile
        raise InvalidRequest(_taken(schedule.name, schedule.owner)) from None
    logger.info(
        "schedule %s updated: %s%s",
        schedule.name,
        ", ".join(sorted(changes)) or "nothing",
        f"; it submits as {user.get_username()} from now on" if takes_over else "",
    )
    return schedule


def _take_over(schedule: Schedule, user) -> None:
    """Make `user` the owner of `schedule` (locked by the caller), as `schedule_update` says."""
    _check_may_submit(user)
    if schedule.owner_id == user.pk:
        return
    _check_schedule_limit(user)
    if Schedule.objects.filter(owner=user, name=schedule.name).exists():
        raise InvalidRequest(_taken(schedule.name, user))
    schedule.owner = user


def schedule_enable(*, user=None, now: datetime | None = None, **address) -> Schedule:
    """Resume a schedule (addressed as for `schedule_update`) at its first slot after `now`
    (slots while paused are not caught up); a no-op on an enabled one."""
    return schedule_update(**address, changes={"enabled": True}, user=user, now=now)


def schedule_disable(*, user=None, **address) -> Schedule:
    """Pause a schedule (addressed as for `schedule_update`): no slot fires until it is
    enabled again."""
    return schedule_update(**address, changes={"enabled": False}, user=user)


@transaction.atomic
def schedule_delete(
    *,
    name: str | None = None,
    owner: str | None = None,
    schedule_id: uuid.UUID | None = None,
    user=None,
) -> None:
    """Delete a schedule (addressed as for `schedule_update`). The jobs it submitted stay."""
    schedule = schedule_to_operate(name=name, owner=owner, schedule_id=schedule_id, user=user)
    _refuse_code_schedule(schedule)
    schedule.delete()
    logger.info("schedule %s deleted", schedule.name)


# --- schedules declared in code ------------------------------------------------------------------

# One sync at a time, cluster-wide: two processes starting together wait for each other.
SYNC_LOCK_KEY = 0x4A_57_53_43  # "JWSC"
RULE_FIELDS = ("cron_expression", "time_zone", "interval_seconds")


@dataclass
class Synced:
    """What a sync of the code's schedules did, by schedule name."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # a name an API schedule already has


@transaction.atomic
def schedules_sync_code(*, now: datetime | None = None) -> Synced:
    """Make the database follow this process's @periodic declarations (§13a): create the new
    ones, update the changed ones (a new rule starts at its first slot after `now`; a disabled
    one is enabled again), disable the ones the code no longer declares. Idempotent, and
    serialized by an advisory lock, so several processes may sync at once. A declaration whose
    name an ownerless API schedule holds (one made from the command line: code schedules share
    their namespace) is skipped and logged: the operator's schedule stays. Users' schedules
    have names of their own and never collide."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [SYNC_LOCK_KEY])
    declared = declarations()
    synced = Synced()
    existing = {
        schedule.name: schedule
        for schedule in Schedule.objects.select_for_update().filter(
            Q(source=ScheduleSource.CODE) | Q(owner=None, name__in=list(declared))
        )
    }
    for name, declaration in sorted(declared.items()):
        schedule = existing.get(name)
        if schedule is not None and schedule.source != ScheduleSource.CODE:
            logger.error("@periodic %s not synced: an API schedule has that name", name)
            synced.skipped.append(name)
            continue
        clean_job_template(declaration.job_template)  # as a firing will read it
        if schedule is None:
            _code_schedule(declaration, now).save(force_insert=True)
            synced.created.append(name)
        elif _sync_one(schedule, declaration, now):
            synced.updated.append(name)
    for name, schedule in sorted(existing.items()):
        if name not in declared and schedule.source == ScheduleSource.CODE and schedule.enabled:
            schedule.enabled, schedule.next_run_at = False, None
            schedule.save(update_fields=["enabled", "next_run_at", "updated_at"])
            synced.disabled.append(name)
    if synced.created or synced.updated or synced.disabled:
        logger.info(
            "code schedules synced: created %s, updated %s, disabled %s",
            synced.created or "none",
            synced.updated or "none",
            synced.disabled or "none",
        )
    return synced


def _code_schedule(declaration: Periodic, now: datetime | None) -> Schedule:
    schedule = Schedule(
        name=declaration.name,
        source=ScheduleSource.CODE,
        owner=None,
        **_declared_fields(declaration),
    )
    schedule.next_run_at = _first_slot(schedule.rule, _now(now))
    return schedule


def _declared_fields(declaration: Periodic) -> dict:
    return {
        "cron_expression": declaration.cron_expression,
        "time_zone": declaration.time_zone or "UTC",
        "interval_seconds": declaration.interval_seconds,
        "job_template": declaration.job_template,
        "misfire_policy": declaration.misfire_policy,
        "enabled": True,
    }


def _sync_one(schedule: Schedule, declaration: Periodic, now: datetime | None) -> bool:
    """Bring one code schedule in line with its declaration; whether anything changed."""
    wanted = _declared_fields(declaration)
    changed = [name for name, value in wanted.items() if getattr(schedule, name) != value]
    if not changed:
        return False
    restart = bool(set(changed) & {*RULE_FIELDS, "enabled"})
    for name in changed:
        setattr(schedule, name, wanted[name])
    if restart:  # slots of the old rule (or while disabled) are not caught up
        schedule.next_run_at = _first_slot(schedule.rule, _now(now))
    schedule.save()
    return True


# --- firing ------------------------------------------------------------------------------------


@dataclass
class Firing:
    """What one firing did for one schedule."""

    schedule: str
    submitted: list[tuple[datetime, uuid.UUID]] = field(default_factory=list)  # (slot, job id)
    replayed: list[tuple[datetime, uuid.UUID]] = field(default_factory=list)  # already there
    missed_from: datetime | None = None
    missed_until: datetime | None = None
    error: str = ""
    next_run_at: datetime | None = None


def schedules_fire(*, now: datetime | None = None) -> list[Firing]:
    """Submit the jobs of every due slot of every enabled schedule, one transaction per
    schedule (a failure stops at one schedule, never undoes the others). `now` is injectable
    so tests can walk a clock across DST changes."""
    now = _now(now)
    firings: list[Firing] = []
    fired: set[uuid.UUID] = set()
    while True:
        firing = _fire_next_due(now=now, fired=fired)
        if firing is None:
            return firings
        firings.append(firing)


@transaction.atomic(durable=True)
def _fire_next_due(*, now: datetime, fired: set[uuid.UUID]) -> Firing | None:
    """Lock one due schedule that no concurrent firing holds, and fire it.

    The row stays locked until this transaction commits its jobs and its new `next_run_at`
    together: a concurrent firing skips it (SKIP LOCKED), or, locking it after the commit,
    finds it no longer due (PostgreSQL re-checks the condition on the new row version).
    `fired` keeps a schedule that errors before advancing from being picked twice in one call.
    """
    schedule = (
        Schedule.objects.select_for_update(skip_locked=True, of=("self",))
        .select_related("owner")
        .filter(enabled=True, next_run_at__lte=now)
        .exclude(id__in=fired)
        .order_by("next_run_at", "id")
        .first()
    )
    if schedule is None:
        return None
    fired.add(schedule.id)
    return _fire(schedule, now)


def _fire(schedule: Schedule, now: datetime) -> Firing:
    """Submit a locked schedule's due slots and advance it. Must run under the row lock."""
    grace = timedelta(seconds=settings.JOBWEAVER_SCHEDULES_MISFIRE_GRACE_SECONDS)
    decision = slots.plan_firing(
        schedule.rule,
        next_run_at=schedule.next_run_at,
        now=now,
        policy=schedule.misfire_policy,
        grace=grace,
    )
    firing = Firing(
        schedule=schedule.name,
        missed_from=decision.missed_from,
        missed_until=decision.missed_until,
        next_run_at=decision.next_run_at,
    )
    if decision.missed_from is not None:
        logger.warning(
            "schedule %s missed its slots from %s to %s (%s)",
            schedule.name,
            decision.missed_from,
            decision.missed_until,
            schedule.misfire_policy,
        )
    try:
        _submit_slots(schedule, decision.submit, firing)
    except QuotaExceeded as exc:
        # Transient (the owner's cap, or their submit throttle): retry this slot at the next
        # tick; once it is older than the grace period it is a missed slot like any other.
        firing.error = f"owner's quota: {exc.message}"
        firing.next_run_at = decision.submit[len(firing.submitted) + len(firing.replayed)]
    except (InvalidRequest, Forbidden) as exc:
        # Permanent for these slots (a template the current limits refuse, a permission the
        # owner lost): they are not submitted, the schedule goes on.
        firing.error = exc.message
    if firing.error:
        logger.warning("schedule %s could not submit: %s", schedule.name, firing.error)
    done = sorted(firing.submitted + firing.replayed)
    if done:
        schedule.last_slot_at, schedule.last_job_id = done[-1]
    schedule.next_run_at = firing.next_run_at
    schedule.last_error = firing.error
    schedule.save(
        update_fields=["next_run_at", "last_slot_at", "last_job_id", "last_error", "updated_at"]
    )
    return firing


def _take_submit_token(owner) -> None:
    """Each job a schedule submits counts against its owner's submit throttle, as a request of
    theirs would (§17); ownerless schedules and operators' are not throttled. An empty bucket
    is QuotaExceeded: the firing waits for a token (see `_fire`)."""
    wait = throttle_take(user=owner, kind=SUBMIT)
    if wait is not None:
        raise QuotaExceeded(
            f"{owner.get_username()}'s submit throttle has no token left, the next in {wait} s "
            "(JOBWEAVER_SUBMIT_THROTTLE_*)",
            retry_after=wait,
        )


def _submit_slots(schedule: Schedule, due: tuple[datetime, ...], firing: Firing) -> None:
    if not due:
        return
    owner = schedule.owner
    if owner is not None and not owner.is_active:
        raise Forbidden(f"the schedule's owner {owner.get_username()!r} is inactive")
    _check_may_submit(owner)  # a permission the owner may have lost since
    spec = clean_job_template(schedule.job_template)
    for slot in due:
        key = slots.slot_key(schedule.id, slot)
        try:
            with transaction.atomic():  # a slot refused by the cap gives its token back
                _take_submit_token(owner)
                result = job_submit(spec=spec, submitted_by=owner, idempotency_key=key)
        except IdempotencyConflict as exc:
            # The slot's job exists, submitted from an earlier version of the template.
            firing.replayed.append((slot, uuid.UUID(exc.job_id)))
            continue
        outcome = firing.submitted if result.created else firing.replayed
        outcome.append((slot, result.job.id))
        if result.created:
            logger.info("schedule %s submitted job %s for %s", schedule.name, result.job.id, slot)
