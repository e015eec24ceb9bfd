"""A schedule's firings count against its owner's submit throttle (§17, issue 35 item 7): each
job takes a token from the bucket the owner's API requests take from; with none left the slot
waits for the next tick (lastError says why) and, past the misfire grace, is missed like any
other. Operators' and ownerless schedules are not throttled."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user, token_for
from jobweaver.schedules.models import Schedule
from jobweaver.schedules.services import schedule_create, schedules_fire
from jobweaver.schedules.tests.helpers import TEMPLATE, jobs_of, submitted_slots

pytestmark = pytest.mark.django_db

START = datetime(2026, 1, 1, 12, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


@pytest.fixture
def two_tokens(settings):
    """Two tokens, and none more during a test (one per 1,000 s)."""
    settings.JOBWEAVER_SUBMIT_THROTTLE_BURST = 2
    settings.JOBWEAVER_SUBMIT_THROTTLE_RATE = 1
    settings.JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS = 1000


def every_second(owner) -> Schedule:
    return schedule_create(
        name="every-second", interval_seconds=1, job_template=TEMPLATE, owner=owner, now=START
    )


def test_a_throttled_owners_slot_waits_then_is_missed_after_the_grace(two_tokens):
    owner = make_user("busy-owner", *SUBMITTER)
    schedule = every_second(owner)

    [firing] = schedules_fire(now=at(3))  # three slots due: two tokens

    assert [slot for slot, _ in firing.submitted] == [at(1), at(2)]
    assert "busy-owner's submit throttle has no token left" in firing.error
    schedule.refresh_from_db()
    assert schedule.next_run_at == at(3)  # the third waits for a token
    assert "submit throttle" in schedule.last_error

    schedules_fire(now=at(4))  # still no token: still waiting, nothing submitted
    schedule.refresh_from_db()
    assert schedule.next_run_at == at(3) and len(jobs_of(schedule)) == 2

    # Past the grace the waiting slot is missed (SKIP); the on-time ones wait in turn.
    [late] = schedules_fire(now=at(3 + 61))
    assert (late.missed_from, late.missed_until) == (at(3), at(3))
    schedule.refresh_from_db()
    assert schedule.next_run_at == at(4)
    assert submitted_slots(schedule) == [at(1), at(2)]


def test_firings_and_the_owners_requests_share_one_bucket(two_tokens):
    owner = make_user("shared-owner", *SUBMITTER)
    every_second(owner)
    schedules_fire(now=at(2))  # two jobs, two tokens
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(owner)}")

    response = client.post("/api/jobs", json.dumps(TEMPLATE), content_type="application/json")

    assert response.status_code == 429 and response["Retry-After"]


@pytest.mark.parametrize("owner", ["operator", None])
def test_operators_and_ownerless_schedules_are_not_throttled(two_tokens, owner):
    if owner is not None:
        owner = make_user(owner, *SUBMITTER, "jobweaver_jobs.operate_all_jobs")
    schedule = every_second(owner)

    [firing] = schedules_fire(now=at(5))

    assert firing.error == ""
    assert submitted_slots(schedule) == [at(1), at(2), at(3), at(4), at(5)]
