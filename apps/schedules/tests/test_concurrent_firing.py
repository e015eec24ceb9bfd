"""Two beats at once: two threads on their own database connections walking the same injected
clock across a DST change, and two real `manage.py schedules fire --now …` processes, still
submit each slot exactly once (the row lock as the fast path, the idempotency key per slot as
the guarantee). Committed data (`live_db`), dated 2027 so a running beat, on the real clock,
never finds these schedules due; each test deletes its schedules."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction

from jobweaver.scheduler.invariants import check_invariants
from jobweaver.schedules.models import Schedule
from jobweaver.schedules.services import schedule_create
from jobweaver.schedules.tests.helpers import (
    NEAR_BERLIN_0230,
    TEMPLATE,
    jobs_of,
    submitted_slots,
    walk,
)
from tests.stack import ROOT, child_environment, wait_for


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


@pytest.fixture
def cleanup(live_db):
    created: list[str] = []
    yield created
    Schedule.objects.filter(name__in=created).delete()


def two_beats(start: datetime, end: datetime, step: timedelta) -> None:
    """Two threads, each a beat with its own connection, walking the same clock together
    (`step` apart around Berlin's 02:30, where the slots are; coarser elsewhere, see walk)."""
    ready = threading.Barrier(2)
    errors: list[BaseException] = []

    def beat() -> None:
        try:
            ready.wait()
            walk(start, end, step=step, near=NEAR_BERLIN_0230)
        except Exception as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=beat) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []


def test_two_beats_across_both_dst_changes_submit_exactly_the_expected_slots(cleanup, unique):
    spring = schedule_create(
        name=f"spring-{unique}",
        cron_expression="30 2 * * *",
        time_zone="Europe/Berlin",
        job_template=TEMPLATE,
        now=utc(2027, 3, 27, 12),
    )
    cleanup.append(spring.name)

    two_beats(utc(2027, 3, 27, 12), utc(2027, 3, 29, 3), timedelta(minutes=1))
    # Out of the way of the autumn walk.
    Schedule.objects.filter(pk=spring.pk).update(enabled=False, next_run_at=None)
    fall = schedule_create(
        name=f"fall-{unique}",
        cron_expression="30 2 * * *",
        time_zone="Europe/Berlin",
        job_template=TEMPLATE,
        now=utc(2027, 10, 30, 12),
    )
    cleanup.append(fall.name)
    two_beats(utc(2027, 10, 30, 12), utc(2027, 11, 1, 3), timedelta(minutes=1))

    assert submitted_slots(spring) == [
        utc(2027, 3, 28, 1, 0),  # 28 March 2027: 02:30 does not exist, 03:00 CEST
        utc(2027, 3, 29, 0, 30),
    ]
    assert submitted_slots(fall) == [
        utc(2027, 10, 31, 0, 30),  # 31 October 2027: the first 02:30 (CEST) only
        utc(2027, 11, 1, 1, 30),
    ]
    assert check_invariants(job_ids=[job.id for job in jobs_of(spring) + jobs_of(fall)]) == []


def fire_process(now: datetime) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "schedules", "fire", "--now", now.isoformat(), "--json"],
        cwd=ROOT,
        env=child_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def waiting_for_schedules() -> int:
    with connection.cursor() as cursor:
        # Inside a transaction the activity view is a snapshot unless cleared.
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE '%%jobweaver_schedules_schedule%%'"
        )
        return cursor.fetchone()[0]


def test_two_fire_processes_at_once_submit_each_slot_once(cleanup, unique):
    start = utc(2027, 6, 1, 12)
    schedules = []
    for index in range(20):
        schedule = schedule_create(
            name=f"race-{unique}-{index}", interval_seconds=10, job_template=TEMPLATE, now=start
        )
        cleanup.append(schedule.name)
        schedules.append(schedule)
    now = start + timedelta(seconds=55)  # slots at +10, +20, +30, +40, +50: all on time

    # Both processes queue behind a table lock, so they race from the same instant.
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("LOCK TABLE jobweaver_schedules_schedule IN EXCLUSIVE MODE")
        processes = [fire_process(now), fire_process(now)]
        wait_for(
            lambda: waiting_for_schedules() == 2,
            timeout=30,
            message="both fire processes to wait on the schedules table",
        )
    outputs = [process.communicate(timeout=120) for process in processes]

    assert [process.returncode for process in processes] == [0, 0], outputs
    reported = [
        (firing["schedule"], job["slot"])
        for out, _ in outputs
        for firing in json.loads(out)
        if firing["schedule"].startswith(f"race-{unique}-")
        for job in firing["submitted"]
    ]
    assert len(reported) == len(set(reported)) == 100  # each slot submitted by one process
    expected = [start + timedelta(seconds=s) for s in (10, 20, 30, 40, 50)]
    for schedule in schedules:
        assert submitted_slots(schedule) == expected, schedule.name
        schedule.refresh_from_db()
        assert schedule.next_run_at == start + timedelta(seconds=60)
    jobs = [job for schedule in schedules for job in jobs_of(schedule)]
    assert check_invariants(job_ids=[job.id for job in jobs]) == []
