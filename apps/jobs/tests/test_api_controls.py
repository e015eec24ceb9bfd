"""/api/pauses and /api/limits: pausing and resuming, setting and removing limits, what a bad
request or a missing permission leaves behind (nothing), and that a pause set here keeps the
dispatcher from sending the queue's jobs."""

from __future__ import annotations

import json
import uuid
from urllib.parse import quote

import pytest
from rest_framework.test import APIClient

from jobweaver.jobs.tests.api_helpers import api_client, assert_error_body
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.models import ConcurrencyLimit, ExecutionStatus, Pause
from jobweaver.scheduler.tests.factories import execution_of, live_executor, submitted_job

pytestmark = pytest.mark.django_db

PAUSER = "jobweaver_scheduler.change_pause"
LIMITER = "jobweaver_scheduler.change_concurrencylimit"


def send(client: APIClient, method: str, path: str, body=None, raw: str | None = None):
    data = raw if raw is not None else (json.dumps(body) if body is not None else "")
    return client.generic(method, path, data, content_type="application/json")


def operator(*permissions: str) -> APIClient:
    return api_client(f"ops-{uuid.uuid4().hex[:6]}", *(permissions or (PAUSER, LIMITER)))


def dispatch() -> set[uuid.UUID]:
    live_executor()
    sent: list = []
    dispatched = set(dispatch_due_jobs(publish=sent.extend))
    assert len(sent) == len(dispatched)
    return dispatched


# --- pauses --------------------------------------------------------------------------------------


def test_pause_list_and_resume_a_queue():
    client = api_client("ops-anna", PAUSER)

    created = send(
        client, "POST", "/api/pauses", {"scope": "QUEUE", "name": "emails", "reason": "smtp down"}
    )
    again = send(
        client, "POST", "/api/pauses", {"scope": "QUEUE", "name": "emails", "reason": "other"}
    )
    listed = client.get("/api/pauses")

    assert created.status_code == 201, created.content
    body = created.json()
    assert set(body) == {"scope", "name", "reason", "pausedBy", "pausedAt"}
    assert (body["scope"], body["name"], body["reason"], body["pausedBy"]) == (
        "QUEUE",
        "emails",
        "smtp down",
        "ops-anna",
    )
    assert body["pausedAt"].endswith("Z")
    assert again.status_code == 200 and again.json() == body  # the first pause stands
    assert listed.status_code == 200 and listed.json() == {"pauses": [body]}

    resumed = client.delete("/api/pauses/QUEUE/emails")
    assert resumed.status_code == 204 and resumed.content == b""
    assert not Pause.objects.exists()
    assert_error_body(client.delete("/api/pauses/QUEUE/emails"), 404, "API.JOB_NOT_FOUND")


def test_pause_a_job_type_without_a_reason():
    client = operator(PAUSER)
    response = send(client, "POST", "/api/pauses", {"scope": "JOB_TYPE", "name": "TASK"})
    assert response.status_code == 201
    assert response.json()["reason"] == ""
    assert Pause.objects.get().name == "TASK"


def test_a_pause_set_through_the_api_keeps_the_queues_jobs_from_being_dispatched():
    client = operator(PAUSER)
    emails = {submitted_job(queueName="emails").id for _ in range(3)}
    others = {submitted_job(queueName="reports").id for _ in range(2)}
    assert (
        send(client, "POST", "/api/pauses", {"scope": "QUEUE", "name": "emails"}).status_code == 201
    )

    assert dispatch() == others
    assert {execution_of(job_id).status for job_id in emails} == {ExecutionStatus.PENDING}

    assert client.delete("/api/pauses/QUEUE/emails").status_code == 204
    assert dispatch() == emails


def test_pausing_takes_back_deliveries_not_yet_started():
    job = submitted_job(queueName="imports")
    assert dispatch() == {job.id}
    assert execution_of(job.id).status == ExecutionStatus.DISPATCHED

    send(operator(PAUSER), "POST", "/api/pauses", {"scope": "QUEUE", "name": "imports"})

    assert execution_of(job.id).status == ExecutionStatus.PENDING
    assert dispatch() == set()


@pytest.mark.parametrize(
    "raw",
    [
        '{"scope": "TOPIC", "name": "emails"}',
        '{"scope": "QUEUE", "name": ""}',
        '{"scope": "QUEUE", "name": "has space"}',
        '{"scope": "QUEUE", "name": "' + "x" * 101 + '"}',
        '{"scope": "QUEUE", "name": null}',
        '{"scope": "QUEUE", "name": 7}',
        '{"scope": ["QUEUE"], "name": "q"}',
        '{"scope": "JOB_TYPE", "name": "simulation"}',
        '{"scope": "JOB_TYPE", "name": {"a": 1}}',
        '{"scope": "QUEUE", "name": "q", "reason": 5}',
        '{"scope": "QUEUE", "name": "q", "reason": "' + "r" * 201 + '"}',
        '{"scope": "QUEUE", "name": "q", "extra": 1}',
        '{"scope": "QUEUE"}',
        '{"name": "q"}',
        "[]",
        '"QUEUE"',
        "null",
        "{",
        '{"scope": "QUEUE", "name": "q", "name": "r"}',
        '{"scope": "QUEUE", "name": "q", "reason": "\\u0000"}',
        "",
    ],
)
def test_a_bad_pause_request_is_400_and_changes_nothing(raw):
    response = send(operator(), "POST", "/api/pauses", raw=raw)
    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert not Pause.objects.exists()


def test_a_pause_body_must_be_json():
    response = operator().post(
        "/api/pauses", "scope=QUEUE&name=q", content_type="application/x-www-form-urlencoded"
    )
    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert not Pause.objects.exists()


@pytest.mark.parametrize(
    "path",
    ["/api/pauses/TOPIC/emails", "/api/pauses/QUEUE/bad%20name", "/api/pauses/JOB_TYPE/nope"],
)
def test_resuming_something_malformed_is_400(path):
    Pause.objects.create(scope="QUEUE", name="emails", paused_at="2026-01-01T00:00:00Z")
    assert_error_body(operator().delete(path), 400, "API.INVALID_REQUEST")
    assert Pause.objects.count() == 1


def test_the_pause_list_refuses_unknown_query_parameters():
    assert_error_body(operator().get("/api/pauses?scope=QUEUE"), 400, "API.INVALID_REQUEST")


# --- limits --------------------------------------------------------------------------------------


def test_set_replace_list_and_delete_a_limit_with_a_glob_pattern():
    client = operator(LIMITER)

    created = send(client, "PUT", "/api/limits/customer-*", {"maxRunning": 2})
    replaced = send(
        client, "PUT", "/api/limits/customer-%2A", {"maxRunning": 5, "maxPerSecond": 10}
    )

    assert created.status_code == 201, created.content
    assert created.json()["pattern"] == "customer-*"
    assert (created.json()["maxRunning"], created.json()["maxPerSecond"]) == (2, None)
    assert replaced.status_code == 200
    assert (replaced.json()["maxRunning"], replaced.json()["maxPerSecond"]) == (5, 10)
    listed = client.get("/api/limits").json()["limits"]
    assert [(item["pattern"], item["maxRunning"], item["maxPerSecond"]) for item in listed] == [
        ("customer-*", 5, 10)
    ]
    assert set(listed[0]) == {"pattern", "maxRunning", "maxPerSecond", "global", "updatedAt"}
    assert listed[0]["global"] is False  # per owner unless asked

    assert client.delete("/api/limits/customer-%2A").status_code == 204
    assert not ConcurrencyLimit.objects.exists()
    assert_error_body(client.delete("/api/limits/customer-*"), 404, "API.JOB_NOT_FOUND")


def test_a_pattern_may_hold_slashes_and_other_characters_when_encoded():
    client = operator(LIMITER)
    pattern = "tenant/42 ?#%*"
    path = "/api/limits/" + quote(pattern, safe="")
    assert send(client, "PUT", path, {"maxPerSecond": 3}).status_code == 201
    assert ConcurrencyLimit.objects.get().pattern == pattern
    assert client.delete(path).status_code == 204


def test_a_limit_set_through_the_api_caps_a_keys_dispatches():
    send(operator(LIMITER), "PUT", "/api/limits/customer-*", {"maxRunning": 2})
    keyed = {submitted_job(concurrencyKey="customer-1").id for _ in range(5)}
    assert len(dispatch() & keyed) == 2
    assert dispatch() == set()


def test_a_limit_is_global_when_asked_and_per_owner_otherwise():
    client = operator(LIMITER)

    made = send(client, "PUT", "/api/limits/customer-*", {"maxRunning": 1, "global": True})
    assert made.status_code == 201, made.content
    assert made.json()["global"] is True
    assert client.get("/api/limits").json()["limits"][0]["global"] is True
    replaced = send(client, "PUT", "/api/limits/customer-*", {"maxRunning": 1})
    assert (replaced.status_code, replaced.json()["global"]) == (200, False)
    assert (
        send(client, "PUT", "/api/limits/k", {"maxRunning": 1, "global": False}).json()["global"]
        is False
    )


def test_two_tenants_with_the_same_key_each_get_their_limit_through_the_api():
    """Issue 35: tenant B submitting tenant A's key neither takes A's slot nor waits for it;
    each sees the key as they gave it."""
    send(operator(LIMITER), "PUT", "/api/limits/customer-*", {"maxRunning": 1})
    job = {
        "jobType": "SIMULATION",
        "payload": {"steps": [{"action": "LOG", "message": "x"}]},
        "concurrencyKey": "customer-42",
    }
    tenants = [api_client(name) for name in ("tenant-a", "tenant-b")]
    submitted = [
        [tenant.post("/api/jobs", job, format="json").json()["jobId"] for _ in range(3)]
        for tenant in tenants
    ]

    sent = {str(job_id) for job_id in dispatch()}

    assert [len(sent & set(job_ids)) for job_ids in submitted] == [1, 1]
    detail = tenants[1].get(f"/api/jobs/{submitted[1][0]}").json()
    assert detail["concurrencyKey"] == "customer-42"


@pytest.mark.parametrize(
    "raw",
    [
        "{}",
        '{"maxRunning": null, "maxPerSecond": null}',
        '{"maxRunning": 0}',
        '{"maxRunning": -1}',
        '{"maxRunning": 1.5}',
        '{"maxRunning": true}',
        '{"maxRunning": "2"}',
        '{"maxPerSecond": 10000001}',
        '{"maxRunning": 1, "pattern": "x"}',
        "[1]",
        "null",
        "{",
        '{"maxRunning": NaN}',
        '{"maxRunning": 1, "global": "yes"}',
        '{"maxRunning": 1, "global": null}',
        '{"maxRunning": 1, "global": 1}',
    ],
)
def test_a_bad_limit_request_is_400_and_changes_nothing(raw):
    ConcurrencyLimit.objects.create(pattern="k", max_running=1)
    response = send(operator(), "PUT", "/api/limits/k", raw=raw)
    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert list(
        ConcurrencyLimit.objects.values_list("pattern", "max_running", "max_per_second")
    ) == [("k", 1, None)]


@pytest.mark.parametrize(
    "pattern", ["x" * 256, "tab%09here", "nul%00", "line%0Abreak", "%0A", "cr%0D%0A"]
)
def test_a_bad_pattern_is_400_and_changes_nothing(pattern):
    response = send(operator(), "PUT", f"/api/limits/{pattern}", {"maxRunning": 1})
    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert not ConcurrencyLimit.objects.exists()


def test_an_empty_pattern_is_no_route():
    response = send(operator(), "PUT", "/api/limits/", {"maxRunning": 1})
    assert_error_body(response, 404, "API.JOB_NOT_FOUND")


def test_a_limit_can_be_read_only_as_a_list():
    ConcurrencyLimit.objects.create(pattern="k", max_running=1)
    assert_error_body(operator().get("/api/limits/k"), 405, "API.INVALID_REQUEST")


# --- who may -------------------------------------------------------------------------------------

CHANGES = [
    ("POST", "/api/pauses", {"scope": "QUEUE", "name": "q"}),
    ("DELETE", "/api/pauses/QUEUE/q", None),
    ("PUT", "/api/limits/k", {"maxRunning": 1}),
    ("DELETE", "/api/limits/k", None),
]


def _existing_controls():
    Pause.objects.create(scope="QUEUE", name="q", paused_at="2026-01-01T00:00:00Z")
    ConcurrencyLimit.objects.create(pattern="k", max_running=7)


def _controls():
    return (
        list(Pause.objects.values_list("scope", "name", "reason")),
        list(ConcurrencyLimit.objects.values_list("pattern", "max_running")),
    )


@pytest.mark.parametrize(("method", "path", "body"), CHANGES)
def test_anonymous_is_401_and_changes_nothing(method, path, body):
    _existing_controls()
    before = _controls()
    response = send(APIClient(), method, path, body)
    assert_error_body(response, 401, "API.UNAUTHENTICATED")
    assert _controls() == before


@pytest.mark.parametrize(
    ("path", "changer"),
    [("/api/pauses", PAUSER), ("/api/limits", LIMITER)],
    ids=["pauses", "limits"],
)
def test_reading_the_controls_is_an_operators(path, changer):
    """§17: a submitter learns nothing of the pauses and limits (their patterns name other
    tenants' keys); an operator who sees all jobs, or one who may change them, reads them."""
    assert_error_body(APIClient().get(path), 401, "API.UNAUTHENTICATED")
    submitter = api_client("reader", "jobweaver_jobs.view_job", "jobweaver_jobs.add_job")
    refused = assert_error_body(submitter.get(path), 403, "API.FORBIDDEN")
    assert "view_all_jobs" in refused["message"]
    for client in (
        api_client("watcher", "jobweaver_jobs.view_all_jobs"),
        api_client("changer", changer),
        api_client("root", is_superuser=True),
    ):
        assert client.get(path).status_code == 200


def test_every_user_reads_the_queues():
    assert api_client("reader", "jobweaver_jobs.view_job").get("/api/queues").status_code == 200


@pytest.mark.parametrize(("method", "path", "body"), CHANGES)
def test_staff_or_the_other_permission_is_not_enough(method, path, body):
    _existing_controls()
    before = _controls()
    other = LIMITER if "pauses" in path else PAUSER
    for client in (
        api_client("staff", "jobweaver_jobs.change_job", is_staff=True),
        operator(other),
    ):
        response = send(client, method, path, body)
        body_ = assert_error_body(response, 403, "API.FORBIDDEN")
        assert ("pause" in body_["message"]) == ("pauses" in path)
    assert _controls() == before


def test_a_superuser_may_change_everything():
    client = api_client("root", is_superuser=True)
    for method, path, body in CHANGES:
        response = send(client, method, path, body)
        assert response.status_code in (200, 201, 204), (method, path, response.content)
