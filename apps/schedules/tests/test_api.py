"""/api/schedules: the happy path, bad inputs (the error body, nothing stored), authentication,
permissions and per-user scoping, with the jobs API's conventions."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from jobweaver.accounts.tests.helpers import make_user, token_for
from jobweaver.jobs.tests.api_helpers import assert_error_body
from jobweaver.schedules.models import Schedule
from jobweaver.schedules.tests.helpers import TEMPLATE

pytestmark = pytest.mark.django_db

# A schedule submits jobs as its owner: managing schedules takes add_job too (§17).
MANAGER = (
    "jobweaver_jobs.add_job",
    "jobweaver_schedules.view_schedule",
    "jobweaver_schedules.add_schedule",
    "jobweaver_schedules.change_schedule",
    "jobweaver_schedules.delete_schedule",
)


def client_for(username: str, *permissions: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(make_user(username, *permissions))}")
    return client


@pytest.fixture
def api() -> APIClient:
    return client_for("scheduler-user", *MANAGER)


def send(client: APIClient, method: str, path: str, body=None, **extra):
    data = json.dumps(body) if body is not None and not isinstance(body, str) else body
    return getattr(client, method)(path, data, content_type="application/json", **extra)


def test_create_show_list_patch_pause_resume_delete(api):
    created = send(
        api,
        "post",
        "/api/schedules",
        {
            "name": "nightly",
            "cron": "30 2 * * *",
            "timeZone": "Europe/Berlin",
            "template": TEMPLATE,
        },
    )

    assert created.status_code == 201, created.content
    assert created["Location"] == "/api/schedules/nightly"
    body = created.json()
    assert body | {"nextRunAt": None, "createdAt": None, "updatedAt": None} == {
        "name": "nightly",
        "owner": "scheduler-user",
        "cron": "30 2 * * *",
        "timeZone": "Europe/Berlin",
        "intervalSeconds": None,
        "template": TEMPLATE,
        "misfirePolicy": "SKIP",
        "enabled": True,
        "source": "api",
        "nextRunAt": None,
        "lastSlotAt": None,
        "lastJobId": None,
        "lastError": None,
        "createdAt": None,
        "updatedAt": None,
    }
    assert body["nextRunAt"].endswith(("T00:30:00.000Z", "T01:30:00.000Z"))
    assert api.get("/api/schedules/nightly").json() == body
    assert [s["name"] for s in api.get("/api/schedules").json()["schedules"]] == ["nightly"]

    patched = send(
        api,
        "patch",
        "/api/schedules/nightly",
        {"intervalSeconds": 60, "misfirePolicy": "CATCH_UP_ONCE"},
    )
    assert patched.status_code == 200, patched.content
    assert (patched.json()["cron"], patched.json()["timeZone"]) == (None, None)
    assert patched.json()["intervalSeconds"] == 60

    paused = api.post("/api/schedules/nightly/pause")
    assert (paused.status_code, paused.json()["enabled"], paused.json()["nextRunAt"]) == (
        200, False, None,
    )  # fmt: skip
    resumed = api.post("/api/schedules/nightly/resume")
    assert resumed.json()["enabled"] is True and resumed.json()["nextRunAt"]
    assert (
        send(api, "patch", "/api/schedules/nightly", {"enabled": False}).json()["enabled"] is False
    )

    assert api.delete("/api/schedules/nightly").status_code == 204
    assert not Schedule.objects.exists()
    assert_error_body(api.get("/api/schedules/nightly"), 404, "API.JOB_NOT_FOUND")


GOOD = {"name": "good", "intervalSeconds": 60, "template": TEMPLATE}


@pytest.mark.parametrize(
    "body",
    [
        {**GOOD, "template": {"jobType": "SIMULATION", "payload": {"steps": []}}},
        {**GOOD, "template": {**TEMPLATE, "runAt": "2030-01-01T00:00:00Z"}},
        {**GOOD, "template": {**TEMPLATE, "surprise": 1}},
        {**GOOD, "cron": "0 0 * * *"},
        {"name": "good", "template": TEMPLATE},
        {**GOOD, "intervalSeconds": "60"},
        {**GOOD, "intervalSeconds": 1.5},
        {"name": "good", "cron": "0 0 * * *", "timeZone": "Atlantis/Capital", "template": TEMPLATE},
        {"name": "good", "cron": "not cron at all", "template": TEMPLATE},
        {**GOOD, "misfirePolicy": "NEVER"},
        {**GOOD, "enabled": "true"},
        {**GOOD, "name": "has space"},
        {**GOOD, "name": None},
        {**GOOD, "extra": True},
        {"intervalSeconds": 60, "template": TEMPLATE},
        [GOOD],
        '{"name": "good", "intervalSeconds": 60, "template": {"jobType": NaN}}',
        '{"name": "good", "name": "twice"}',
    ],
)
def test_a_bad_create_is_a_400_error_body_and_stores_nothing(api, body):
    response = send(api, "post", "/api/schedules", body)

    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert not Schedule.objects.exists()


def test_a_duplicate_name_is_refused(api):
    assert send(api, "post", "/api/schedules", GOOD).status_code == 201

    assert_error_body(send(api, "post", "/api/schedules", GOOD), 400, "API.INVALID_REQUEST")
    assert Schedule.objects.count() == 1


def test_a_bad_patch_changes_nothing(api):
    send(api, "post", "/api/schedules", GOOD)
    before = Schedule.objects.get().updated_at

    for body in ({}, {"name": "renamed"}, {"cron": "0 0 * * *", "intervalSeconds": 5},
                 {"template": None}, {"timeZone": "UTC"}):  # fmt: skip
        assert_error_body(
            send(api, "patch", "/api/schedules/good", body), 400, "API.INVALID_REQUEST"
        )
    assert Schedule.objects.get().updated_at == before


def test_content_type_must_be_json(api):
    response = api.post("/api/schedules", json.dumps(GOOD), content_type="text/plain")

    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert not Schedule.objects.exists()


def test_anonymous_is_401_and_missing_permissions_are_403():
    anonymous = APIClient()
    assert_error_body(anonymous.get("/api/schedules"), 401, "API.UNAUTHENTICATED")
    assert_error_body(send(anonymous, "post", "/api/schedules", GOOD), 401, "API.UNAUTHENTICATED")

    viewer = client_for("viewer", "jobweaver_schedules.view_schedule")
    assert viewer.get("/api/schedules").status_code == 200
    assert_error_body(send(viewer, "post", "/api/schedules", GOOD), 403, "API.FORBIDDEN")
    assert not Schedule.objects.exists()


def test_users_see_and_change_only_their_own_schedules(api):
    send(api, "post", "/api/schedules", GOOD)
    other = client_for("other-user", *MANAGER)
    auditor = client_for("auditor", *MANAGER, "jobweaver_jobs.view_all_jobs")

    assert other.get("/api/schedules").json() == {"schedules": []}
    assert_error_body(other.get("/api/schedules/good"), 404, "API.JOB_NOT_FOUND")
    assert_error_body(other.post("/api/schedules/good/pause"), 404, "API.JOB_NOT_FOUND")
    assert_error_body(other.delete("/api/schedules/good"), 404, "API.JOB_NOT_FOUND")
    assert Schedule.objects.get().enabled is True
    assert [s["name"] for s in auditor.get("/api/schedules").json()["schedules"]] == ["good"]


def test_names_are_per_owner(api):
    other = client_for("other-user", *MANAGER)

    assert send(api, "post", "/api/schedules", GOOD).status_code == 201
    assert send(other, "post", "/api/schedules", GOOD).status_code == 201
    duplicate = send(other, "post", "/api/schedules", {**GOOD, "intervalSeconds": 120})

    assert_error_body(duplicate, 400, "API.INVALID_REQUEST")
    assert "other-user already has a schedule named 'good'" in duplicate.json()["message"]
    assert sorted(Schedule.objects.values_list("owner__username", "name")) == [
        ("other-user", "good"), ("scheduler-user", "good"),
    ]  # fmt: skip
    # Each user's name means their own schedule.
    assert send(other, "patch", "/api/schedules/good", {"enabled": False}).status_code == 200
    assert api.get("/api/schedules/good").json()["enabled"] is True


def test_another_owners_schedule_is_not_found_exactly_like_a_missing_one(api):
    send(api, "post", "/api/schedules", GOOD)
    other = client_for("other-user", *MANAGER)

    for path in ("/api/schedules/good", "/api/schedules/missing"):
        for owner in ("", "?owner=scheduler-user", "?owner=nobody"):
            response = other.get(path + owner)
            body = assert_error_body(response, 404, "API.JOB_NOT_FOUND")
            name = path.rsplit("/", 1)[1]
            assert body["message"] in (
                f"no such schedule: {name!r}",
                f"no such schedule of {owner.partition('=')[2]}: {name!r}",
            )
    assert other.get("/api/schedules?owner=scheduler-user").json() == {"schedules": []}
    assert_error_body(
        send(other, "patch", "/api/schedules/good?owner=scheduler-user", {"enabled": False}),
        404,
        "API.JOB_NOT_FOUND",
    )
    assert Schedule.objects.get().enabled is True


def test_operators_address_another_owners_schedule_with_owner(api):
    send(api, "post", "/api/schedules", GOOD)
    viewer = client_for("viewer", *MANAGER, "jobweaver_jobs.view_all_jobs")
    operator = client_for(
        "operator", *MANAGER, "jobweaver_jobs.view_all_jobs", "jobweaver_jobs.operate_all_jobs"
    )
    send(operator, "post", "/api/schedules", {**GOOD, "intervalSeconds": 600})

    # Without ?owner= the name is the requesting user's own.
    assert operator.get("/api/schedules/good").json()["intervalSeconds"] == 600
    theirs = viewer.get("/api/schedules/good?owner=scheduler-user")
    assert (theirs.status_code, theirs.json()["owner"]) == (200, "scheduler-user")
    listed = operator.get("/api/schedules?owner=scheduler-user").json()["schedules"]
    assert [(s["name"], s["owner"]) for s in listed] == [("good", "scheduler-user")]

    # Seeing is not acting: that needs jobs.operate_all_jobs.
    assert_error_body(
        viewer.post("/api/schedules/good/pause?owner=scheduler-user"), 403, "API.FORBIDDEN"
    )
    assert_error_body(
        viewer.delete("/api/schedules/good?owner=scheduler-user"), 403, "API.FORBIDDEN"
    )
    paused = operator.post("/api/schedules/good/pause?owner=scheduler-user")
    assert (paused.status_code, paused.json()["owner"]) == (200, "scheduler-user")
    assert Schedule.objects.get(owner__username="scheduler-user").enabled is False
    assert Schedule.objects.get(owner__username="operator").enabled is True


@pytest.mark.parametrize("query", ["?owner=a&page=1", "?sort=name", "?owner=%00"])
def test_a_bad_query_parameter_is_a_400(api, query):
    send(api, "post", "/api/schedules", GOOD)

    assert_error_body(api.get("/api/schedules/good" + query), 400, "API.INVALID_REQUEST")
    assert_error_body(api.get("/api/schedules" + query), 400, "API.INVALID_REQUEST")


def test_a_schedule_is_created_as_ones_own():
    operator = client_for(
        "operator", *MANAGER, "jobweaver_jobs.view_all_jobs", "jobweaver_jobs.operate_all_jobs"
    )
    make_user("someone-else")

    response = send(operator, "post", "/api/schedules?owner=someone-else", GOOD)

    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert not Schedule.objects.exists()


def test_a_template_priority_the_owner_may_not_submit_is_403(api):
    response = send(
        api, "post", "/api/schedules", {**GOOD, "template": {**TEMPLATE, "priority": 9}}
    )

    assert_error_body(response, 403, "API.FORBIDDEN")
    assert not Schedule.objects.exists()
