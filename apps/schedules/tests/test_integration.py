"""Recurring jobs on the real stack (scheduler worker, beat and an executor over Kafka): beat's
`fire_schedules` tick submits a 1-second interval schedule's jobs and they run to COMPLETED; with
a second beat process started beside the first, every slot is still submitted exactly once."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobweaver.scheduler.models import JobExecution
from jobweaver.schedules.models import Schedule
from jobweaver.schedules.services import schedule_create, schedule_disable
from jobweaver.schedules.tests.helpers import TEMPLATE, jobs_of, submitted_slots
from tests.integration.helpers import assert_invariants
from tests.stack import WorkerProcess, wait_for

pytestmark = [pytest.mark.integration]

JOBS = 6


def completed(schedule: Schedule) -> int:
    ids = [job.id for job in jobs_of(schedule)]
    return JobExecution.objects.filter(job_id__in=ids, status="COMPLETED").count()


def test_an_interval_schedule_runs_its_jobs_once_per_slot_under_two_beats(stack, live_db, unique):
    second_beat = WorkerProcess("beat", f"beat-schedules-{unique}").start()
    try:
        second_beat.wait_ready()
        schedule = schedule_create(
            name=f"every-second-{unique}", interval_seconds=1, job_template=TEMPLATE
        )
        wait_for(
            lambda: completed(schedule) >= JOBS,
            timeout=60,
            message=f"{JOBS} of the schedule's jobs to complete",
        )
        schedule_disable(name=schedule.name)
    finally:
        second_beat.stop()
        Schedule.objects.filter(name=f"every-second-{unique}").update(
            enabled=False, next_run_at=None
        )

    # No slot twice, none skipped: one job for each second from the first slot to the last.
    slots = submitted_slots(schedule)
    assert len(slots) >= JOBS
    assert slots == [slots[0] + timedelta(seconds=n) for n in range(len(slots))]
    jobs = jobs_of(schedule)
    for job in jobs:
        wait_for(
            lambda job=job: JobExecution.objects.get(job_id=job.id).status == "COMPLETED",
            timeout=30,
            message=f"job {job.id} to complete",
        )
    assert_invariants(job.id for job in jobs)
    Schedule.objects.filter(pk=schedule.pk).delete()
