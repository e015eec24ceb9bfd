"""The Schedule admin: the list with the next run, the template shown as JSON, and add, change,
pause and delete going through the services (a bad definition is a form error, never stored)."""

import json

import pytest

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
    assert (schedule.interval_seconds, schedule.created_by) == (30, admin_user)
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
