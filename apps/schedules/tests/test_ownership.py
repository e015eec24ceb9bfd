"""Who a schedule submits as (§17, issue 35 items 1 and 2): a schedule needs add_job as well as
add_schedule, and changing what a schedule submits or when makes the editor its owner, checked
against the editor's permissions, in the API and the admin. An ownerless schedule (the
command line's) is no way around the priority permission, the cap or the throttle; another
user's is no way to submit as them."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from jobweaver.accounts.tests.helpers import SUBMITTER, grant, make_user
from jobweaver.core.errors import Forbidden
from jobweaver.jobs.tests.api_helpers import assert_error_body
from jobweaver.schedules.models import Schedule
from jobweaver.schedules.services import schedule_create, schedule_update, schedules_fire
from jobweaver.schedules.tests.helpers import TEMPLATE, jobs_of
from jobweaver.schedules.tests.test_api import GOOD, MANAGER, client_for, send

pytestmark = pytest.mark.django_db

OPERATOR = ("jobweaver_jobs.view_all_jobs", "jobweaver_jobs.operate_all_jobs")
URGENT = {**TEMPLATE, "priority": 9}
START = datetime(2026, 1, 1, 12, tzinfo=UTC)


def cli_schedule(template=TEMPLATE) -> Schedule:
    """What `manage.py schedules create` makes: no owner, trusted."""
    return schedule_create(name="from-cli", interval_seconds=60, job_template=template, now=START)


def fire_once(schedule: Schedule):
    schedule.refresh_from_db()
    return schedules_fire(now=schedule.next_run_at)


# --- add_job -------------------------------------------------------------------------------------


def test_creating_a_schedule_needs_add_job_as_well_as_add_schedule():
    without = client_for("no-add-job", *(p for p in MANAGER if p != "jobweaver_jobs.add_job"))

    response = send(without, "post", "/api/schedules", GOOD)

    body = assert_error_body(response, 403, "API.FORBIDDEN")
    assert "jobweaver_jobs.add_job" in body["message"]
    assert not Schedule.objects.exists()
    with pytest.raises(Forbidden, match="add_job"):
        schedule_create(
            name="x", interval_seconds=60, job_template=TEMPLATE, owner=make_user("nobody")
        )
    assert not Schedule.objects.exists()


def test_a_schedule_whose_owner_lost_add_job_submits_nothing_and_says_why():
    owner = make_user("revoked", *SUBMITTER)
    schedule = schedule_create(
        name="revoked", interval_seconds=60, job_template=TEMPLATE, owner=owner, now=START
    )
    owner.user_permissions.clear()

    [firing] = fire_once(schedule)

    assert firing.submitted == [] and "add_job" in firing.error
    assert jobs_of(schedule) == []
    schedule.refresh_from_db()
    assert "add_job" in schedule.last_error


# --- an edit makes the editor the owner: the API ------------------------------------------------


def test_an_edit_of_a_cli_schedule_cannot_give_the_editor_priority_9():
    """The finding: the editor of an ownerless schedule got uncapped priority-9 jobs."""
    cli_schedule()
    editor = client_for("editor", *MANAGER, *OPERATOR)  # no submit_high_priority

    response = send(editor, "patch", "/api/schedules/from-cli", {"template": URGENT})

    body = assert_error_body(response, 403, "API.FORBIDDEN")
    assert "priority" in body["message"]
    schedule = Schedule.objects.get()
    assert (schedule.owner, schedule.job_template) == (None, TEMPLATE)


def test_an_edit_of_a_cli_schedule_makes_it_the_editors_and_it_submits_as_them():
    schedule = cli_schedule(URGENT)  # the command line may: it is trusted
    editor = client_for("editor", *MANAGER, *OPERATOR)

    # Any change to what it submits or when is an edit: here the interval. The priority-9
    # template it keeps is now checked against the editor, who may not submit it.
    refused = send(editor, "patch", "/api/schedules/from-cli", {"intervalSeconds": 120})
    assert_error_body(refused, 403, "API.FORBIDDEN")
    assert Schedule.objects.get().owner is None

    edited = send(editor, "patch", "/api/schedules/from-cli", {"template": TEMPLATE})
    assert (edited.status_code, edited.json()["owner"]) == (200, "editor")
    [firing] = fire_once(schedule)
    [job] = jobs_of(schedule)
    assert job.submitted_by.username == "editor" and job.priority == 5
    assert firing.error == ""
    # It is the editor's now: their name for it, not the shared namespace's.
    assert editor.get("/api/schedules/from-cli").json()["owner"] == "editor"


def test_an_operators_edit_of_a_users_schedule_submits_as_the_operator():
    alice = client_for("alice", *MANAGER)
    send(alice, "post", "/api/schedules", GOOD)
    operator = client_for("operator", *MANAGER, *OPERATOR)

    edited = send(operator, "patch", "/api/schedules/good?owner=alice", {"intervalSeconds": 120})

    assert (edited.status_code, edited.json()["owner"]) == (200, "operator")
    schedule = Schedule.objects.get()
    assert schedule.owner.username == "operator"
    fire_once(schedule)
    assert {job.submitted_by.username for job in jobs_of(schedule)} == {"operator"}
    # Gone from alice's schedules: she no longer submits its jobs, nor sees it.
    assert alice.get("/api/schedules").json() == {"schedules": []}


def test_pause_and_resume_leave_the_owner_as_it_was():
    alice = client_for("alice", *MANAGER)
    send(alice, "post", "/api/schedules", GOOD)
    operator = client_for("operator", *MANAGER, *OPERATOR)

    assert operator.post("/api/schedules/good/pause?owner=alice").json()["owner"] == "alice"
    assert operator.post("/api/schedules/good/resume?owner=alice").json()["owner"] == "alice"
    patched = send(operator, "patch", "/api/schedules/good?owner=alice", {"enabled": False})
    assert patched.json()["owner"] == "alice"


def test_an_edit_that_would_take_a_name_the_editor_has_is_refused():
    alice = client_for("alice", *MANAGER)
    send(alice, "post", "/api/schedules", GOOD)
    operator = client_for("operator", *MANAGER, *OPERATOR)
    send(operator, "post", "/api/schedules", GOOD)

    response = send(operator, "patch", "/api/schedules/good?owner=alice", {"intervalSeconds": 90})

    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert "operator already has a schedule named 'good'" in response.json()["message"]
    assert Schedule.objects.get(owner__username="alice").interval_seconds == 60


def test_an_edit_needs_add_job_since_it_submits_as_the_editor():
    cli_schedule()
    editor = make_user("editor", *OPERATOR, "jobweaver_schedules.change_schedule")

    with pytest.raises(Forbidden, match="add_job"):
        schedule_update(name="from-cli", changes={"interval_seconds": 90}, user=editor)
    schedule_update(name="from-cli", changes={"enabled": False}, user=editor)  # a pause may
    assert Schedule.objects.get().owner is None

    schedule_update(
        name="from-cli",
        changes={"interval_seconds": 90},
        user=grant(editor, "jobweaver_jobs.add_job"),
    )
    assert Schedule.objects.get().owner.username == "editor"


def test_the_command_line_edits_as_itself_and_leaves_the_owner():
    owner = make_user("alice", *SUBMITTER)
    schedule_create(name="hers", interval_seconds=60, job_template=TEMPLATE, owner=owner)

    schedule_update(name="hers", owner="alice", changes={"interval_seconds": 90})

    assert Schedule.objects.get().owner == owner


# --- the admin ----------------------------------------------------------------------------------

URL = "/admin/jobweaver_schedules/schedule/"
STAFF = (
    "jobweaver_jobs.add_job",
    "jobweaver_schedules.add_schedule",
    "jobweaver_schedules.view_schedule",
    "jobweaver_schedules.change_schedule",
)


def form(schedule: Schedule, **fields) -> dict:
    return {
        "cron_expression": "",
        "time_zone": "UTC",
        "interval_seconds": str(schedule.interval_seconds),
        "job_template": json.dumps(schedule.job_template),
        "misfire_policy": schedule.misfire_policy,
        "enabled": "on",
        **fields,
    }


def test_an_admin_edit_of_a_cli_schedule_is_checked_against_the_editor(client):
    schedule = cli_schedule()
    client.force_login(make_user("staff-operator", *STAFF, *OPERATOR, is_staff=True))
    change = f"{URL}{schedule.pk}/change/"

    refused = client.post(change, form(schedule, job_template=json.dumps(URGENT)))
    assert refused.status_code == 200 and "priority above" in refused.content.decode()
    assert Schedule.objects.get().job_template == TEMPLATE

    assert client.post(change, form(schedule, interval_seconds="120")).status_code == 302
    edited = Schedule.objects.get()
    assert (edited.interval_seconds, edited.owner.username) == (120, "staff-operator")


def test_the_admin_offers_add_only_with_add_job(client):
    client.force_login(
        make_user("no-add-job", *(p for p in STAFF if p != "jobweaver_jobs.add_job"), is_staff=True)
    )

    assert client.get(f"{URL}add/").status_code == 403
    assert not Schedule.objects.exists()
