"""The limits on schedules (§17, issue 35): a schedule fires at most every
JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS, refused alike by the API (400), the admin (a form
error) and the command line (exit 2), with nothing stored (the test settings lower the minimum
to 1 s for the tests that fire schedules; these raise it to its default, 60); and a user owns
at most JOBWEAVER_MAX_SCHEDULES_PER_USER, operators exempt, even with concurrent creates."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection

from jobweaver.accounts.tests.helpers import make_user
from jobweaver.core.errors import InvalidRequest
from jobweaver.jobs.tests.api_helpers import assert_error_body
from jobweaver.schedules.management.commands.schedules import Command
from jobweaver.schedules.models import Schedule
from jobweaver.schedules.services import schedule_create
from jobweaver.schedules.tests.helpers import TEMPLATE
from jobweaver.schedules.tests.test_api import GOOD, MANAGER, client_for, send

pytestmark = pytest.mark.django_db

OPERATOR = ("jobweaver_jobs.view_all_jobs", "jobweaver_jobs.operate_all_jobs")


@pytest.fixture
def minimum(settings):
    settings.JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS = 60


@pytest.fixture
def api():
    return client_for("scheduler-user", *MANAGER)


# --- the minimum interval ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rule",
    [{"intervalSeconds": 59}, {"intervalSeconds": 1}, {"cron": "* * * * *"}],
)
def test_a_schedule_firing_more_often_than_the_minimum_is_a_400(api, minimum, settings, rule):
    if "cron" in rule:  # a cron fires every minute at most: raise the minimum above that
        settings.JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS = 300
    body = {"name": "often", "template": TEMPLATE, **rule}

    response = send(api, "post", "/api/schedules", body)

    body = assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert "JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS" in body["message"]
    assert not Schedule.objects.exists()


def test_the_minimum_itself_and_a_cron_as_far_apart_are_accepted(api, minimum, settings):
    assert send(api, "post", "/api/schedules", {**GOOD, "intervalSeconds": 60}).status_code == 201
    settings.JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS = 300
    cron = {"name": "five", "cron": "*/5 * * * *", "template": TEMPLATE}
    assert send(api, "post", "/api/schedules", cron).status_code == 201


def test_a_patch_to_a_shorter_interval_is_a_400_and_changes_nothing(api, minimum):
    send(api, "post", "/api/schedules", GOOD)

    response = send(api, "patch", "/api/schedules/good", {"intervalSeconds": 30})

    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert Schedule.objects.get().interval_seconds == 60


def test_a_schedule_changing_hands_is_held_to_the_minimum(settings):
    """A rule from before the minimum stays its owner's; an editor taking the schedule over
    takes it as a new one, under today's minimum."""
    early = client_for("early", *MANAGER)
    send(early, "post", "/api/schedules", {**GOOD, "intervalSeconds": 10})  # the minimum was 1
    settings.JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS = 60
    operator = client_for("operator", *MANAGER, *OPERATOR)
    other_template = {**TEMPLATE, "maxRetryCount": 1}

    kept = send(early, "patch", "/api/schedules/good", {"template": other_template})
    taken = send(operator, "patch", "/api/schedules/good?owner=early", {"template": TEMPLATE})

    assert kept.status_code == 200, kept.content
    assert_error_body(taken, 400, "API.INVALID_REQUEST")
    schedule = Schedule.objects.get()
    assert (schedule.owner.username, schedule.job_template) == ("early", other_template)


def test_the_admin_refuses_a_short_interval_with_a_form_error(client, minimum):
    client.force_login(
        make_user(
            "staff",
            "jobweaver_jobs.add_job",
            "jobweaver_schedules.add_schedule",
            "jobweaver_schedules.view_schedule",
            is_staff=True,
        )
    )
    form = {
        "name": "from-admin",
        "cron_expression": "",
        "time_zone": "UTC",
        "interval_seconds": "30",
        "job_template": json.dumps(TEMPLATE),
        "misfire_policy": "SKIP",
        "enabled": "on",
    }

    response = client.post("/admin/jobweaver_schedules/schedule/add/", form)

    assert response.status_code == 200
    assert "JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS" in response.content.decode()
    assert not Schedule.objects.exists()


def test_the_command_line_exits_2_with_the_reason(run_command, minimum):
    result = run_command(
        Command, "schedules", "create", "x", "--interval", "30", "--template", json.dumps(TEMPLATE)
    )

    assert result.code == 2
    assert "intervalSeconds must be at least 60" in result.err
    assert not Schedule.objects.exists()


# --- schedules per user --------------------------------------------------------------------------


@pytest.fixture
def two_per_user(settings):
    settings.JOBWEAVER_MAX_SCHEDULES_PER_USER = 2


def named(name: str) -> dict:
    return {**GOOD, "name": name}


def test_a_user_over_the_schedule_limit_is_a_400_and_nothing_is_stored(api, two_per_user):
    assert [send(api, "post", "/api/schedules", named(n)).status_code for n in "ab"] == [201, 201]

    response = send(api, "post", "/api/schedules", named("c"))

    body = assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert "scheduler-user has 2 schedules" in body["message"]
    assert "JOBWEAVER_MAX_SCHEDULES_PER_USER" in body["message"]
    assert sorted(Schedule.objects.values_list("name", flat=True)) == ["a", "b"]
    assert api.delete("/api/schedules/a").status_code == 204  # a deletion frees a place
    assert send(api, "post", "/api/schedules", named("c")).status_code == 201


def test_the_limit_is_per_user_and_operators_are_exempt(api, two_per_user):
    other = client_for("other-user", *MANAGER)
    operator = client_for("operator", *MANAGER, *OPERATOR)
    for name in "ab":
        send(api, "post", "/api/schedules", named(name))

    assert send(other, "post", "/api/schedules", named("a")).status_code == 201
    assert [send(operator, "post", "/api/schedules", named(n)).status_code for n in "abc"] == [
        201
    ] * 3


def test_zero_is_no_limit(api, settings):
    settings.JOBWEAVER_MAX_SCHEDULES_PER_USER = 0

    assert [send(api, "post", "/api/schedules", named(n)).status_code for n in "abc"] == [201] * 3


@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_never_pass_the_limit_together(settings):
    settings.JOBWEAVER_MAX_SCHEDULES_PER_USER = 3
    owner = make_user("racer", "jobweaver_jobs.add_job")
    barrier = threading.Barrier(10)
    outcomes: list[str] = []

    def create(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            schedule_create(
                name=f"s{index}", interval_seconds=60, job_template=TEMPLATE, owner=owner
            )
            outcomes.append("created")
        except InvalidRequest as exc:
            outcomes.append(exc.message)
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(i,)) for i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert outcomes.count("created") == 3, outcomes
    assert Schedule.objects.filter(owner=owner).count() == 3
