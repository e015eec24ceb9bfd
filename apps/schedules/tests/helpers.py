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


def walk(start: datetime, end: datetime, *, step: timedelta) -> None:
    """Fire at every tick of an injected clock from `start` to `end`, as beat would."""
    now = start
    while now <= end:
        schedules_fire(now=now)
        now += step


def jobs_of(schedule: Schedule) -> list[Job]:
    prefix = f"schedule:{schedule.id}:"
    return list(Job.objects.filter(idempotency_key__startswith=prefix).order_by("idempotency_key"))


def submitted_slots(schedule: Schedule) -> list[datetime]:
    """The slots the schedule submitted a job for (one job each: the key is the slot's),
    oldest first."""
    keys = [job.idempotency_key for job in jobs_of(schedule)]
    return sorted(datetime.fromisoformat(key.split(":", 2)[2]) for key in keys)
