"""Helpers of the schedule tests: a job template, a walking clock, and what a schedule
submitted (read back from the jobs' idempotency keys)."""

from __future__ import annotations

from datetime import datetime, timedelta

from jobweaver.jobs.models import Job
from jobweaver.schedules.models import Schedule
from jobweaver.schedules.services import schedules_fire

TEMPLATE = {
    "jobType": "SIMULATION",
    "payload": {"steps": [{"action": "LOG", "message": "from a schedule"}]},
}


# Berlin's 02:30, in UTC: 00:30 (summer), 01:30 (winter), 01:00 on the spring change day.
NEAR_BERLIN_0230 = (22, 4)


def walk(
    start: datetime,
    end: datetime,
    *,
    step: timedelta,
    near: tuple[int, int] | None = None,
    far_step: timedelta = timedelta(minutes=15),
) -> None:
    """Fire at every tick of an injected clock from `start` to `end`, as beat would.

    With `near` (UTC hours [from, to), across midnight if from > to), ticks are `step` apart in
    those hours only and `far_step` apart elsewhere. Firing takes whatever is due by the tick,
    so a slot due at a wrong hour is still fired, and seen by its key, at the next far tick;
    the fine ticks stay where the slots are, and the suite skips thousands of empty ones."""
    now = start
    while now <= end:
        schedules_fire(now=now)
        now += step if near is None or _within(now.hour, near) else far_step


def _within(hour: int, hours: tuple[int, int]) -> bool:
    first, last = hours
    return first <= hour < last if first <= last else hour >= first or hour < last


def jobs_of(schedule: Schedule) -> list[Job]:
    prefix = f"schedule:{schedule.id}:"
    return list(Job.objects.filter(idempotency_key__startswith=prefix).order_by("idempotency_key"))


def submitted_slots(schedule: Schedule) -> list[datetime]:
    """The slots the schedule submitted a job for (one job each: the key is the slot's),
    oldest first."""
    keys = [job.idempotency_key for job in jobs_of(schedule)]
    return sorted(datetime.fromisoformat(key.split(":", 2)[2]) for key in keys)
