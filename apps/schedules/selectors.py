"""Reads of schedules. A user sees their own schedules, or every one with
`schedules.view_all_schedules`; `user=None` is a trusted caller (CLI, admin, beat)."""

from __future__ import annotations

from django.db.models import QuerySet

from jobweaver.accounts.selectors import holds
from jobweaver.core.errors import JobNotFound
from jobweaver.core.timeutil import iso
from jobweaver.schedules.models import Schedule
from jobweaver.schedules.validation import NAME_PATTERN

VIEW_ALL = "jobweaver_schedules.view_all_schedules"


class ScheduleNotFound(JobNotFound):
    """No such schedule, or not the user's. The API has one not-found code (ARCHITECTURE §8:
    API.JOB_NOT_FOUND, 404); the message says what was not found. The CLI exits 2."""


def _visible(user) -> QuerySet[Schedule]:
    schedules = Schedule.objects.select_related("created_by")
    if user is None or holds(user, VIEW_ALL):
        return schedules
    return schedules.filter(created_by=user)


def schedule_list(*, user=None) -> list[Schedule]:
    return list(_visible(user).order_by("name"))


def schedule_get(*, name: str, user=None, for_update: bool = False) -> Schedule:
    """The schedule called `name`; with `for_update`, its row locked until the caller's
    transaction ends (so it must run inside one)."""
    schedules = _visible(user)
    if for_update:
        schedules = schedules.select_for_update(of=("self",))
    # A name no schedule can have (a NUL, say, which PostgreSQL refuses) is simply not found.
    valid = isinstance(name, str) and NAME_PATTERN.fullmatch(name)
    schedule = schedules.filter(name=name).first() if valid else None
    if schedule is None:
        raise ScheduleNotFound(f"no such schedule: {name!r}")
    return schedule


def schedule_to_dict(schedule: Schedule) -> dict:
    """A schedule as the API and `manage.py schedules … --json` show it."""
    cron = schedule.cron_expression is not None
    return {
        "name": schedule.name,
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
        "createdBy": schedule.created_by.get_username() if schedule.created_by else None,
        "createdAt": iso(schedule.created_at),
        "updatedAt": iso(schedule.updated_at),
    }
