"""The schedule services against the real PostgreSQL: definitions are validated before anything
is stored, and firing with an injected clock across DST change days submits exactly the expected
slots, once each, with the misfire policies applied after downtime."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user
from jobweaver.core.errors import Forbidden, InvalidRequest
from jobweaver.scheduler.beat import beat_schedule_setup
from jobweaver.scheduler.invariants import check_invariants
from jobweaver.schedules.models import Schedule
from jobweaver.schedules.selectors import ScheduleNotFound
from jobweaver.schedules.services import (
    schedule_create,
    schedule_delete,
    schedule_disable,
    schedule_enable,
    schedule_update,
    schedules_fire,
)
from jobweaver.schedules.slots import slot_key
from jobweaver.schedules.tasks import fire_schedules
from jobweaver.schedules.tests.helpers import (
    NEAR_BERLIN_0230,
    TEMPLATE,
    jobs_of,
    submitted_slots,
    walk,
)

pytestmark = pytest.mark.django_db


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def test_a_0230_berlin_job_fires_once_on_spring_forward_day_with_a_walking_clock():
    schedule = schedule_create(
        name="berlin-spring",
        cron_expression="30 2 * * *",
        time_zone="Europe/Berlin",
        job_template=TEMPLATE,
        now=utc(2026, 3, 27, 12),
    )

    # A beat ticking every minute around 02:30 through the change day and the days around it.
    walk(utc(2026, 3, 27, 12), utc(2026, 3, 31), step=timedelta(minutes=1), near=NEAR_BERLIN_0230)

    assert submitted_slots(schedule) == [
        utc(2026, 3, 28, 1, 30),  # 02:30 CET
        utc(2026, 3, 29, 1, 0),  # 02:30 does not exist: 03:00 CEST, when the gap ends
        utc(2026, 3, 30, 0, 30),  # 02:30 CEST
    ]
    assert check_invariants(job_ids=[job.id for job in jobs_of(schedule)]) == []


def test_a_0230_berlin_job_fires_once_on_fall_back_day_with_a_walking_clock():
    schedule = schedule_create(
        name="berlin-fall",
        cron_expression="30 2 * * *",
        time_zone="Europe/Berlin",
        job_template=TEMPLATE,
        now=utc(2026, 10, 23, 12),
    )

    walk(utc(2026, 10, 23, 12), utc(2026, 10, 27), step=timedelta(minutes=1), near=NEAR_BERLIN_0230)

    assert submitted_slots(schedule) == [
        utc(2026, 10, 24, 0, 30),
        utc(2026, 10, 25, 0, 30),  # 02:30 happens twice: the first (CEST) only
        utc(2026, 10, 26, 1, 30),  # 02:30 CET
    ]
    assert check_invariants(job_ids=[job.id for job in jobs_of(schedule)]) == []


def test_new_york_across_fall_back_with_a_coarse_clock():
    schedule = schedule_create(
        name="ny-0130",
        cron_expression="30 1 * * *",
        time_zone="America/New_York",
        job_template=TEMPLATE,
        now=utc(2026, 10, 31, 12),
    )

    # Ticks every 20 s around the repeated hour (01:00-02:00 twice).
    walk(utc(2026, 11, 1, 5), utc(2026, 11, 1, 7), step=timedelta(seconds=20))

    assert submitted_slots(schedule) == [utc(2026, 11, 1, 5, 30)]  # 01:30 EDT, not 01:30 EST
    schedule.refresh_from_db()
    assert schedule.next_run_at == utc(2026, 11, 2, 6, 30)


def test_firing_twice_at_the_same_time_submits_once():
    schedule = schedule_create(
        name="every-minute", interval_seconds=60, job_template=TEMPLATE, now=utc(2026, 1, 1, 12)
    )

    first = schedules_fire(now=utc(2026, 1, 1, 12, 1))
    second = schedules_fire(now=utc(2026, 1, 1, 12, 1))

    assert [len(f.submitted) for f in first] == [1] and second == []
    assert len(jobs_of(schedule)) == 1


def test_a_slot_fired_again_replays_its_job_through_the_idempotency_key():
    schedule = schedule_create(
        name="replayed", interval_seconds=60, job_template=TEMPLATE, now=utc(2026, 1, 1, 12)
    )
    [firing] = schedules_fire(now=utc(2026, 1, 1, 12, 1))
    # As if a second beat had read the old next_run_at and got past the row lock.
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=utc(2026, 1, 1, 12, 1))

    [again] = schedules_fire(now=utc(2026, 1, 1, 12, 1, 30))

    assert again.submitted == [] and again.replayed == firing.submitted
    [job] = jobs_of(schedule)
    assert job.idempotency_key == slot_key(schedule.id, utc(2026, 1, 1, 12, 1))


def test_skip_after_downtime_submits_nothing_and_jumps_ahead():
    schedule = schedule_create(
        name="hourly-skip", cron_expression="0 * * * *", job_template=TEMPLATE,
        now=utc(2026, 1, 1, 0, 30),
    )  # fmt: skip

    [firing] = schedules_fire(now=utc(2026, 1, 1, 5, 30))  # down from 00:30 to 05:30

    assert firing.submitted == []
    assert (firing.missed_from, firing.missed_until) == (utc(2026, 1, 1, 1), utc(2026, 1, 1, 5))
    schedule.refresh_from_db()
    assert schedule.next_run_at == utc(2026, 1, 1, 6) and jobs_of(schedule) == []
    schedules_fire(now=utc(2026, 1, 1, 6, 0, 5))
    assert submitted_slots(schedule) == [utc(2026, 1, 1, 6)]


def test_catch_up_once_submits_the_latest_missed_slot_then_continues():
    schedule = schedule_create(
        name="hourly-catch-up", cron_expression="0 * * * *", job_template=TEMPLATE,
        misfire_policy="CATCH_UP_ONCE", now=utc(2026, 1, 1, 0, 30),
    )  # fmt: skip

    schedules_fire(now=utc(2026, 1, 1, 5, 30))
    schedules_fire(now=utc(2026, 1, 1, 6, 0, 5))

    assert submitted_slots(schedule) == [utc(2026, 1, 1, 5), utc(2026, 1, 1, 6)]


def test_a_user_schedule_submits_as_its_owner():
    owner = make_user("schedule-owner", *SUBMITTER)
    schedule = schedule_create(
        name="owned", interval_seconds=10, job_template=TEMPLATE, owner=owner,
        now=utc(2026, 1, 1),
    )  # fmt: skip

    schedules_fire(now=utc(2026, 1, 1, 0, 0, 10))

    [job] = jobs_of(schedule)
    assert job.submitted_by == owner


def test_an_inactive_owner_submits_nothing_and_the_error_is_recorded():
    owner = make_user("gone-owner", *SUBMITTER)
    schedule = schedule_create(
        name="orphan", interval_seconds=10, job_template=TEMPLATE, owner=owner,
        now=utc(2026, 1, 1),
    )  # fmt: skip
    owner.is_active = False
    owner.save()

    [firing] = schedules_fire(now=utc(2026, 1, 1, 0, 0, 10))

    assert firing.submitted == [] and "inactive" in firing.error
    schedule.refresh_from_db()
    assert "inactive" in schedule.last_error
    assert schedule.next_run_at == utc(2026, 1, 1, 0, 0, 20)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"name": "-bad"}, "name"),
        ({"name": "a" * 101}, "name"),
        ({"cron_expression": "61 * * * *"}, "cron"),
        ({"cron_expression": "0 0 * * *", "interval_seconds": 60}, "exactly one"),
        ({"cron_expression": None}, "exactly one"),
        ({"cron_expression": "0 0 * * *", "time_zone": "Nowhere/Land"}, "timeZone"),
        ({"interval_seconds": 60, "time_zone": "UTC", "cron_expression": None}, "timeZone"),
        ({"interval_seconds": 0, "cron_expression": None}, "intervalSeconds"),
        ({"job_template": {"jobType": "SIMULATION"}}, "template"),
        ({"job_template": {**TEMPLATE, "runAt": "2030-01-01T00:00:00Z"}}, "runAt"),
        ({"job_template": "not an object"}, "template"),
        ({"misfire_policy": "SOMETIMES"}, "misfirePolicy"),
        ({"enabled": "yes"}, "enabled"),
    ],
)
def test_a_bad_definition_is_refused_and_nothing_is_stored(fields, reason):
    definition = {"name": "ok", "cron_expression": "0 0 * * *", "job_template": TEMPLATE}

    with pytest.raises(InvalidRequest, match=reason):
        schedule_create(**(definition | fields))

    assert not Schedule.objects.exists()


def test_a_template_above_the_owners_priority_is_forbidden():
    owner = make_user("low-priority", *SUBMITTER)

    with pytest.raises(Forbidden, match="priority"):
        schedule_create(
            name="urgent", interval_seconds=60, job_template={**TEMPLATE, "priority": 9},
            owner=owner,
        )  # fmt: skip

    assert not Schedule.objects.exists()


def test_names_are_unique_per_owner_and_among_the_ownerless():
    alice, bob = make_user("alice", *SUBMITTER), make_user("bob", *SUBMITTER)
    for owner in (None, alice, bob):
        schedule_create(name="once", interval_seconds=60, job_template=TEMPLATE, owner=owner)

    with pytest.raises(InvalidRequest, match="without an owner already exists"):
        schedule_create(name="once", interval_seconds=30, job_template=TEMPLATE)
    with pytest.raises(InvalidRequest, match="alice already has a schedule named 'once'"):
        schedule_create(name="once", interval_seconds=30, job_template=TEMPLATE, owner=alice)
    assert Schedule.objects.filter(name="once").count() == 3


@pytest.mark.parametrize("owned", [True, False])
def test_the_database_holds_a_name_once_per_owner(owned):
    """The constraints behind the services' check, for two creates racing past it."""
    owner = make_user("racer", *SUBMITTER) if owned else None
    schedule_create(name="raced", interval_seconds=60, job_template=TEMPLATE, owner=owner)
    twin = Schedule.objects.get()
    twin.pk = None

    with pytest.raises(IntegrityError), transaction.atomic():
        twin.save(force_insert=True)


def test_services_address_a_schedule_by_name_within_its_owners():
    alice = make_user("alice", *SUBMITTER)
    theirs = schedule_create(name="same", interval_seconds=60, job_template=TEMPLATE, owner=alice)
    shared = schedule_create(name="same", interval_seconds=60, job_template=TEMPLATE)

    schedule_disable(name="same")  # the command line, without --owner: the ownerless one
    assert Schedule.objects.get(pk=shared.pk).enabled is False
    assert Schedule.objects.get(pk=theirs.pk).enabled is True
    schedule_disable(name="same", owner="alice")
    assert Schedule.objects.get(pk=theirs.pk).enabled is False
    with pytest.raises(ScheduleNotFound):
        schedule_delete(name="same", owner="nobody")


def test_pause_resume_update_and_delete():
    start = utc(2026, 1, 1, 12)
    schedule_create(name="lifecycle", interval_seconds=60, job_template=TEMPLATE, now=start)

    paused = schedule_disable(name="lifecycle")
    assert (paused.enabled, paused.next_run_at) == (False, None)
    assert schedules_fire(now=start + timedelta(hours=1)) == []

    resumed = schedule_enable(name="lifecycle", now=start + timedelta(hours=2))
    assert resumed.next_run_at == start + timedelta(hours=2, minutes=1)  # nothing caught up

    to_cron = schedule_update(
        name="lifecycle",
        changes={"cron_expression": "30 2 * * *", "time_zone": "Europe/Berlin"},
        now=start,
    )
    assert (to_cron.interval_seconds, to_cron.next_run_at) == (None, utc(2026, 1, 2, 1, 30))
    template_only = schedule_update(name="lifecycle", changes={"misfire_policy": "CATCH_UP_ONCE"})
    assert template_only.next_run_at == utc(2026, 1, 2, 1, 30)  # the rule did not change
    with pytest.raises(InvalidRequest, match="timeZone"):
        schedule_update(name="lifecycle", changes={"interval_seconds": 5, "time_zone": "UTC"})

    schedule_delete(name="lifecycle")
    with pytest.raises(ScheduleNotFound):
        schedule_delete(name="lifecycle")


def test_beat_fires_schedules_through_the_task():
    assert "jobweaver: fire schedules" in beat_schedule_setup()
    entry = PeriodicTask.objects.get(name="jobweaver: fire schedules")
    assert entry.task == "jobweaver.schedules.tasks.fire_schedules"
    schedule = schedule_create(
        name="due-now",
        interval_seconds=1,
        job_template=TEMPLATE,
        now=timezone.now() - timedelta(seconds=5),
    )

    submitted = fire_schedules()

    assert submitted == len(jobs_of(schedule)) >= 4
