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

MANAGER = (
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
        "createdBy": "scheduler-user",
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
    auditor = client_for("auditor", *MANAGER, "jobweaver_schedules.view_all_schedules")

    assert other.get("/api/schedules").json() == {"schedules": []}
    assert_error_body(other.get("/api/schedules/good"), 404, "API.JOB_NOT_FOUND")
    assert_error_body(other.post("/api/schedules/good/pause"), 404, "API.JOB_NOT_FOUND")
    assert_error_body(other.delete("/api/schedules/good"), 404, "API.JOB_NOT_FOUND")
    assert Schedule.objects.get().enabled is True
    assert [s["name"] for s in auditor.get("/api/schedules").json()["schedules"]] == ["good"]


def test_a_template_priority_the_owner_may_not_submit_is_403(api):
    response = send(
        api, "post", "/api/schedules", {**GOOD, "template": {**TEMPLATE, "priority": 9}}
    )

    assert_error_body(response, 403, "API.FORBIDDEN")
    assert not Schedule.objects.exists()
