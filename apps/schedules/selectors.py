"""Reads of schedules (ARCHITECTURE §17). Names are per owner. A user sees their own schedules,
or every one with jobs.view_all_jobs; acting on one that is not theirs needs
jobs.operate_all_jobs. `user=None` is a trusted caller (CLI, beat).

How a schedule is addressed (`schedule_get`):

- `owner="<username>"`: that user's schedule of that name (operators address another owner's
  this way; to anyone else another owner's is not found, like a missing one);
- no owner, a user: the user's own; failing that, for an operator (view_all_jobs), the
  ownerless one of that name: the shared namespace of schedules made from the command line and
  declared in code (§13a);
- no owner, no user (the command line without --owner): the ownerless one.
"""

from __future__ import annotations

import uuid

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

from jobweaver.accounts.selectors import holds
from jobweaver.core.errors import Forbidden, JobNotFound
from jobweaver.core.timeutil import iso
from jobweaver.jobs.selectors import OPERATE_ALL_JOBS, VIEW_ALL_JOBS, may_operate
from jobweaver.schedules.models import Schedule
from jobweaver.schedules.validation import NAME_PATTERN


class ScheduleNotFound(JobNotFound):
    """No such schedule, or not the user's. The API has one not-found code (ARCHITECTURE §8:
    API.JOB_NOT_FOUND, 404); the message says what was not found. The CLI exits 2."""


def sees_all(user) -> bool:
    """Whether `user` sees every user's schedules: a trusted caller, or jobs.view_all_jobs."""
    return user is None or holds(user, VIEW_ALL_JOBS)


def _visible(user) -> QuerySet[Schedule]:
    schedules = Schedule.objects.select_related("owner")
    if sees_all(user):
        return schedules
    return schedules.filter(owner=user)


def _by_owner(schedules: QuerySet[Schedule], owner: str) -> QuerySet[Schedule]:
    return schedules.filter(**{f"owner__{get_user_model().USERNAME_FIELD}": owner})


def schedule_list(*, user=None, owner: str | None = None) -> list[Schedule]:
    """The schedules `user` sees, by name (and owner); with `owner`, that user's only."""
    schedules = _visible(user)
    if owner is not None:
        schedules = _by_owner(schedules, owner)
    return list(schedules.order_by("name", "owner_id"))


def schedule_get(
    *,
    name: str | None = None,
    owner: str | None = None,
    schedule_id: uuid.UUID | None = None,
    user=None,
    for_update: bool = False,
) -> Schedule:
    """The schedule called `name` as the module's docstring says, or the one with
    `schedule_id` (the admin's handle), among those `user` sees; with `for_update`, its row
    locked until the caller's transaction ends (so it must run inside one)."""
    schedules = _visible(user)
    if for_update:
        schedules = schedules.select_for_update(of=("self",))
    if schedule_id is not None:
        schedule = schedules.filter(id=schedule_id).first()
        if schedule is None:
            raise ScheduleNotFound(f"no such schedule: {schedule_id}")
        return schedule
    # A name no schedule can have (a NUL, say, which PostgreSQL refuses) is simply not found.
    schedule = None
    if isinstance(name, str) and NAME_PATTERN.fullmatch(name):
        named = schedules.filter(name=name)
        if owner is not None:
            schedule = _by_owner(named, owner).first()
        elif user is None:
            schedule = named.filter(owner=None).first()
        else:
            schedule = named.filter(owner=user).first()
            if schedule is None and sees_all(user):
                schedule = named.filter(owner=None).first()
    if schedule is None:
        whose = f" of {owner}" if owner is not None else ""
        raise ScheduleNotFound(f"no such schedule{whose}: {name!r}")
    return schedule


def schedule_to_operate(
    *,
    name: str | None = None,
    owner: str | None = None,
    schedule_id: uuid.UUID | None = None,
    user=None,
) -> Schedule:
    """`schedule_get(for_update=True)`, for a change: a schedule `user` sees but may not act on
    (not theirs, and no jobs.operate_all_jobs) is Forbidden (403), as for jobs."""
    schedule = schedule_get(
        name=name, owner=owner, schedule_id=schedule_id, user=user, for_update=True
    )
    if not may_operate(user, schedule.owner_id):
        raise Forbidden(f"acting on another user's schedule needs {OPERATE_ALL_JOBS}")
    return schedule


def schedule_to_dict(schedule: Schedule) -> dict:
    """A schedule as the API and `manage.py schedules … --json` show it."""
    cron = schedule.cron_expression is not None
    return {
        "name": schedule.name,
        "owner": schedule.owner.get_username() if schedule.owner else None,
        "cron": schedule.cron_expression,
        "timeZone": schedule.time_zone if cron else None,
        "intervalSeconds": schedule.interval_seconds,
        "template": schedule.job_template,
        "misfirePolicy": schedule.misfire_policy,
        "enabled": schedule.enabled,
        "source": schedule.source,
        "nextRunAt": iso(schedule.next_run_at),
        "lastSlotAt": iso(schedule.last_slot_at),
        "lastJobId": str(schedule.last_job_id) if schedule.last_job_id else None,
        "lastError": schedule.last_error or None,
        "createdAt": iso(schedule.created_at),
        "updatedAt": iso(schedule.updated_at),
    }
