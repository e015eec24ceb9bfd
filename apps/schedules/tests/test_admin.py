"""The Schedule admin: the list with the next run, the template shown as JSON, and add, change,
pause and delete going through the services (a bad definition is a form error, never stored)."""

import json

import pytest

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user
from jobweaver.schedules.models import Schedule
from jobweaver.schedules.services import schedule_create
from jobweaver.schedules.tests.helpers import TEMPLATE

pytestmark = pytest.mark.django_db

URL = "/admin/jobweaver_schedules/schedule/"


def form(**fields) -> dict:
    return {
        "name": "from-admin",
        "cron_expression": "",
        "time_zone": "UTC",
        "interval_seconds": "",
        "job_template": json.dumps(TEMPLATE),
        "misfire_policy": "SKIP",
        "enabled": "on",
        **fields,
    }


def test_the_list_and_the_change_page_render(admin_client):
    schedule = schedule_create(
        name="nightly", cron_expression="30 2 * * *", time_zone="Europe/Berlin",
        job_template=TEMPLATE,
    )  # fmt: skip

    listing = admin_client.get(URL).content.decode()
    change = admin_client.get(f"{URL}{schedule.pk}/change/").content.decode()

    assert "nightly" in listing and "cron 30 2 * * * (Europe/Berlin)" in listing
    assert "&quot;jobType&quot;: &quot;SIMULATION&quot;" in change  # the template, as JSON


def test_add_goes_through_the_services(admin_client, admin_user):
    response = admin_client.post(f"{URL}add/", form(interval_seconds="30"))

    assert response.status_code == 302, response.content.decode()[:2000]
    schedule = Schedule.objects.get(name="from-admin")
    assert (schedule.interval_seconds, schedule.owner) == (30, admin_user)
    assert schedule.next_run_at is not None


@pytest.mark.parametrize(
    "fields",
    [
        {"cron_expression": "61 * * * *"},
        {"interval_seconds": "30", "cron_expression": "0 0 * * *"},
        {"interval_seconds": "30", "job_template": json.dumps({"jobType": "SIMULATION"})},
        {"cron_expression": "0 0 * * *", "time_zone": "Nowhere/Land"},
    ],
)
def test_a_bad_definition_is_a_form_error(admin_client, fields):
    response = admin_client.post(f"{URL}add/", form(**fields))

    assert response.status_code == 200 and "errornote" in response.content.decode()
    assert not Schedule.objects.exists()


def test_change_keeps_the_next_run_unless_the_rule_changes(admin_client):
    schedule = schedule_create(name="from-admin", interval_seconds=30, job_template=TEMPLATE)
    change = f"{URL}{schedule.pk}/change/"

    admin_client.post(change, form(interval_seconds="30", misfire_policy="CATCH_UP_ONCE"))
    same = Schedule.objects.get()
    admin_client.post(change, form(cron_expression="0 3 * * *", time_zone="Europe/Berlin"))
    cron = Schedule.objects.get()

    assert (same.misfire_policy, same.next_run_at) == ("CATCH_UP_ONCE", schedule.next_run_at)
    assert (cron.cron_expression, cron.interval_seconds) == ("0 3 * * *", None)


def test_pause_action_and_delete(admin_client):
    schedule = schedule_create(name="from-admin", interval_seconds=30, job_template=TEMPLATE)

    admin_client.post(URL, {"action": "pause", "_selected_action": [str(schedule.pk)]})
    assert Schedule.objects.get().enabled is False
    admin_client.post(f"{URL}{schedule.pk}/delete/", {"post": "yes"})
    assert not Schedule.objects.exists()


SCHEDULE_PERMISSIONS = (
    "jobweaver_schedules.view_schedule",
    "jobweaver_schedules.change_schedule",
    "jobweaver_schedules.delete_schedule",
)


def test_a_staff_user_sees_and_changes_only_their_own_schedules(client):
    alice = make_user("alice", *SUBMITTER, *SCHEDULE_PERMISSIONS, is_staff=True)
    bob = make_user("bob", *SUBMITTER, *SCHEDULE_PERMISSIONS, is_staff=True)
    mine = schedule_create(name="mine", interval_seconds=30, job_template=TEMPLATE, owner=alice)
    theirs = schedule_create(name="theirs", interval_seconds=30, job_template=TEMPLATE, owner=bob)
    shared = schedule_create(name="shared", interval_seconds=30, job_template=TEMPLATE)
    client.force_login(alice)

    listing = client.get(URL).content.decode()
    assert "mine" in listing and "theirs" not in listing and "shared" not in listing
    for other in (theirs, shared):
        assert client.get(f"{URL}{other.pk}/change/").status_code == 302  # "does not exist"
        client.post(f"{URL}{other.pk}/change/", form(name=other.name, interval_seconds="60"))
        client.post(URL, {"action": "pause", "_selected_action": [str(other.pk)]})
        client.post(f"{URL}{other.pk}/delete/", {"post": "yes"})
    assert Schedule.objects.count() == 3
    assert not Schedule.objects.filter(interval_seconds=60).exists()
    assert Schedule.objects.filter(enabled=True).count() == 3
    client.post(URL, {"action": "pause", "_selected_action": [str(mine.pk)]})
    assert Schedule.objects.get(pk=mine.pk).enabled is False


def test_an_operator_sees_everyones_and_acts_only_with_operate_all_jobs(client):
    bob = make_user("bob", *SUBMITTER)
    theirs = schedule_create(name="theirs", interval_seconds=30, job_template=TEMPLATE, owner=bob)
    viewer = make_user(
        "viewer", *SCHEDULE_PERMISSIONS, "jobweaver_jobs.view_all_jobs", is_staff=True
    )
    client.force_login(viewer)

    assert "theirs" in client.get(URL).content.decode()
    assert client.post(f"{URL}{theirs.pk}/change/", form(name="theirs")).status_code == 403
    response = client.post(
        URL, {"action": "pause", "_selected_action": [str(theirs.pk)]}, follow=True
    )
    assert "1 skipped" in response.content.decode()
    assert Schedule.objects.get().enabled is True

    operator = make_user(
        "operator",
        *SCHEDULE_PERMISSIONS,
        "jobweaver_jobs.view_all_jobs",
        "jobweaver_jobs.operate_all_jobs",
        is_staff=True,
    )
    client.force_login(operator)
    client.post(URL, {"action": "pause", "_selected_action": [str(theirs.pk)]})
    assert Schedule.objects.get().enabled is False
