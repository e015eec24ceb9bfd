"""Every rejected request returns the error body with 400/401/413 and persists nothing."""

import json

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from jobweaver.accounts.tests.helpers import SUBMITTER, grant
from jobweaver.jobs.models import Job
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.models import JobExecution

VALID = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "hi"}]}}


@pytest.fixture
def client(db):
    user = grant(get_user_model().objects.create_user("alice", password="pw"), *SUBMITTER)
    api = APIClient()
    api.force_authenticate(user)
    return api


def post_raw(client, body: str, content_type="application/json", **headers):
    return client.generic("POST", "/api/jobs", body, content_type=content_type, **headers)


def with_steps(*steps):
    return {"jobType": "SIMULATION", "payload": {"steps": list(steps)}}


REJECTED = {
    "malformed JSON": "{not json",
    "JSON array instead of object": "[1, 2]",
    "NaN literal": '{"jobType": "SIMULATION", "payload": {"steps": []}, "priority": NaN}',
    "duplicate keys": '{"jobType": "SIMULATION", "jobType": "SIMULATION", "payload": {}}',
    "missing payload": json.dumps({"jobType": "SIMULATION"}),
    "unknown job type": json.dumps({**VALID, "jobType": "SHELL"}),
    "unknown top-level field": json.dumps({**VALID, "owner": "bob"}),
    "unknown action": json.dumps(with_steps({"action": "EXPLODE"})),
    "negative duration": json.dumps(with_steps({"action": "SLEEP", "durationMs": -1})),
    "duration above limit": json.dumps(with_steps({"action": "SLEEP", "durationMs": 600_001})),
    "duration as string": json.dumps(with_steps({"action": "SLEEP", "durationMs": "100"})),
    "duration as float": json.dumps(with_steps({"action": "SLEEP", "durationMs": 1.5})),
    "boolean as integer": json.dumps(with_steps({"action": "COMPUTE", "iterations": True})),
    "unknown step field": json.dumps(with_steps({"action": "LOG", "message": "x", "level": 1})),
    "missing step field": json.dumps(with_steps({"action": "LOG"})),
    "step not an object": json.dumps(with_steps("LOG")),
    "no steps": json.dumps(with_steps()),
    "too many steps": json.dumps(with_steps(*[{"action": "LOG", "message": "x"}] * 101)),
    "steps not an array": json.dumps({"jobType": "SIMULATION", "payload": {"steps": {}}}),
    "unknown payload field": json.dumps(
        {"jobType": "SIMULATION", "payload": {"steps": [], "extra": 1}}
    ),
    "message too long": json.dumps(with_steps({"action": "LOG", "message": "x" * 1001})),
    "non-http url": json.dumps(
        with_steps({"action": "HTTP_CALL", "url": "ftp://example.com", "latencyMs": 5})
    ),
    "retryable not boolean": json.dumps(with_steps({"action": "FAIL", "retryable": "no"})),
    "flaky zero": json.dumps(with_steps({"action": "FLAKY", "failTimes": 0})),
    "priority out of range": json.dumps({**VALID, "priority": 10}),
    "negative maxRetryCount": json.dumps({**VALID, "maxRetryCount": -1}),
    "timeout zero": json.dumps({**VALID, "timeoutSeconds": 0}),
    "runAt not a date": json.dumps({**VALID, "runAt": "tomorrow"}),
    "runAt without zone": json.dumps({**VALID, "runAt": "2030-01-01T00:00:00"}),
}


def assert_error_body(response, status, code):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"timestamp", "status", "errorCode", "message", "jobId"}
    assert body["status"] == status
    assert body["errorCode"] == code
    assert body["message"]
    return body


@pytest.mark.parametrize("body", REJECTED.values(), ids=REJECTED.keys())
def test_rejected_request_returns_400_and_persists_nothing(client, body):
    response = post_raw(client, body)
    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert Job.objects.count() == 0
    assert JobExecution.objects.count() == 0
    assert OutboxEvent.objects.count() == 0


def test_error_message_names_the_offending_field(client):
    response = post_raw(client, json.dumps(with_steps({"action": "SLEEP", "durationMs": -5})))
    assert "payload.steps[0].durationMs" in response.json()["message"]


def test_wrong_content_type_is_rejected(client):
    response = post_raw(client, json.dumps(VALID), content_type="text/plain")
    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert Job.objects.count() == 0


def test_body_over_the_limit_is_413(client, settings):
    settings.JOBWEAVER_MAX_REQUEST_BYTES = 1024
    body = json.dumps(
        with_steps({"action": "LOG", "message": "x" * 900}, {"action": "LOG", "message": "y" * 900})
    )
    response = post_raw(client, body)
    assert_error_body(response, 413, "API.PAYLOAD_TOO_LARGE")
    assert Job.objects.count() == 0


def test_step_limit_is_a_setting(client, settings):
    settings.JOBWEAVER_MAX_STEPS = 2
    body = json.dumps(with_steps(*[{"action": "LOG", "message": "x"}] * 3))
    assert_error_body(post_raw(client, body), 400, "API.INVALID_REQUEST")


def test_anonymous_requests_get_401(db):
    anonymous = APIClient()
    assert_error_body(post_raw(anonymous, json.dumps(VALID)), 401, "API.UNAUTHENTICATED")
    assert_error_body(anonymous.get("/api/jobs"), 401, "API.UNAUTHENTICATED")
    assert Job.objects.count() == 0


def test_bad_token_gets_401(db):
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert_error_body(api.get("/api/jobs"), 401, "API.UNAUTHENTICATED")


def test_unknown_job_is_404_with_error_body(client):
    body = assert_error_body(
        client.get("/api/jobs/4b0e6c1e-4bd4-4bbf-9c4e-1b8d0d1f6d7a"), 404, "API.JOB_NOT_FOUND"
    )
    assert body["jobId"] == "4b0e6c1e-4bd4-4bbf-9c4e-1b8d0d1f6d7a"
    assert_error_body(client.get("/api/jobs/not-a-uuid"), 404, "API.JOB_NOT_FOUND")


def test_bad_list_parameters_are_400(client):
    assert_error_body(client.get("/api/jobs?size=101"), 400, "API.INVALID_REQUEST")
    assert_error_body(client.get("/api/jobs?page=-1"), 400, "API.INVALID_REQUEST")
    assert_error_body(client.get("/api/jobs?status=SLEEPING"), 400, "API.INVALID_REQUEST")
    assert_error_body(client.get("/api/jobs?sort=id"), 400, "API.INVALID_REQUEST")


def test_valid_submission_is_accepted(client):
    response = post_raw(client, json.dumps(VALID), HTTP_X_TRACE_ID="trace-abc-1")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "PENDING"
    assert body["traceId"] == "trace-abc-1"
    assert response["X-Trace-Id"] == "trace-abc-1"
    assert response["Location"] == f"/api/jobs/{body['jobId']}"
    job = Job.objects.get(id=body["jobId"])
    assert job.execution.status == "PENDING"
    assert OutboxEvent.objects.filter(topic="job-created", key=str(job.id)).count() == 1


def test_retry_of_a_pending_job_is_409(client):
    job_id = post_raw(client, json.dumps(VALID)).json()["jobId"]
    assert_error_body(client.post(f"/api/jobs/{job_id}/retry"), 409, "API.INVALID_STATE_TRANSITION")


def test_list_pages_and_filters(client):
    ids = [post_raw(client, json.dumps(VALID)).json()["jobId"] for _ in range(5)]
    page = client.get("/api/jobs?page=1&size=2&status=PENDING&type=SIMULATION").json()
    assert page["totalElements"] == 5
    assert page["totalPages"] == 3
    assert page["page"] == 1 and page["size"] == 2
    assert [job["jobId"] for job in page["jobs"]] == list(reversed(ids))[2:4]
    assert client.get("/api/jobs?status=COMPLETED").json()["totalElements"] == 0


def test_users_see_only_their_own_jobs(client, db):
    job_id = post_raw(client, json.dumps(VALID)).json()["jobId"]
    other = APIClient()
    other.force_authenticate(get_user_model().objects.create_user("bob", password="pw"))
    assert other.get(f"/api/jobs/{job_id}").status_code == 404
    assert other.get("/api/jobs").json()["totalElements"] == 0
