# One case per line reads better than a formatter's wrapping: the table is the test.
# ruff: noqa: E501
"""What an attacker sends, table-driven (OWASP API4, API8): every bad request gets a 4xx with the
API's error body and its error code, never a 500 or an HTML page, and persists nothing (the
numbers of jobs, executions and outbox events are unchanged).

Includes every input a review found turning into a 500 or HTML: a NUL in a LOG message, JSON
nested 2,000 deep, a lone surrogate, runAt in year 9999 with a negative offset or year 1 with a
positive one, ?page=² and a 5,000-digit page, a session-authenticated body over 2.5 MB, and
unknown routes under /api/.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user, token_for
from jobweaver.jobs.tests.api_helpers import assert_error_body, counts

pytestmark = pytest.mark.django_db

LOG = {"action": "LOG", "message": "hi"}


def job(*steps: dict, **fields) -> dict:
    return {"jobType": "SIMULATION", "payload": {"steps": list(steps or [LOG])}, **fields}


def nested(depth: int) -> str:
    """A job whose LOG message is an array nested `depth` deep (raw text: json.dumps would
    recurse)."""
    return (
        '{"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": '
        + "[" * depth
        + "]" * depth
        + "}]}}"
    )


@dataclass
class Bad:
    status: int
    code: str
    body: object = None  # dict -> JSON; str/bytes -> sent as is
    method: str = "POST"
    path: str = "/api/jobs"
    content_type: str = "application/json"
    headers: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    auth: str = "token"  # token | session | anonymous | bad-token


def far_future(days: float) -> str:
    return (timezone.now() + timedelta(days=days)).isoformat()


BIG_SESSION_BODY = json.dumps(job({"action": "LOG", "message": "y" * 2_700_000}))

CASES: dict[str, Bad] = {
    # --- characters and nesting the database or the logs cannot take -----------------------------
    "NUL in a LOG message": Bad(400, "API.INVALID_REQUEST", job({"action": "LOG", "message": "a\u0000b"})),
    "escape character in a message": Bad(400, "API.INVALID_REQUEST", job({"action": "LOG", "message": "\u001b[2J"})),
    "DEL in a message": Bad(400, "API.INVALID_REQUEST", job({"action": "FAIL", "message": "a\u007fb"})),
    "lone surrogate in a message": Bad(400, "API.INVALID_REQUEST", '{"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "\\ud800"}]}}'),
    "lone surrogate in a key": Bad(400, "API.INVALID_REQUEST", '{"jobType": "SIMULATION", "payload": {"steps": []}, "\\udfff": 1}'),
    "JSON nested 2,000 deep": Bad(400, "API.INVALID_REQUEST", nested(2000)),
    "JSON nested past the depth limit": Bad(400, "API.INVALID_REQUEST", nested(40)),
    "NUL in a URL": Bad(400, "API.INVALID_REQUEST", job({"action": "HTTP_CALL", "url": "http://a\u0000.example", "latencyMs": 1})),
    # --- runAt -----------------------------------------------------------------------------------
    "runAt year 9999 with a negative offset": Bad(400, "API.INVALID_REQUEST", job(runAt="9999-12-31T23:59:59-05:00")),
    "runAt year 1 with a positive offset": Bad(400, "API.INVALID_REQUEST", job(runAt="0001-01-01T00:00:00+05:00")),
    "runAt beyond the horizon": Bad(400, "API.INVALID_REQUEST", job(runAt=far_future(30)), settings={"JOBWEAVER_MAX_RUN_AT_DAYS": 7}),
    "runAt with an impossible offset": Bad(400, "API.INVALID_REQUEST", job(runAt="2030-01-01T00:00:00+18:00")),
    "runAt as a number": Bad(400, "API.INVALID_REQUEST", job(runAt=1_900_000_000)),
    # --- per-job limits --------------------------------------------------------------------------
    "simulated time over the cap": Bad(400, "API.INVALID_REQUEST", job(*[{"action": "SLEEP", "durationMs": 600_000}] * 7)),
    "simulated latency over the cap": Bad(400, "API.INVALID_REQUEST", job({"action": "HTTP_CALL", "url": "https://a.example", "latencyMs": 600_000}), settings={"JOBWEAVER_MAX_SIMULATED_SECONDS_PER_JOB": 60}),
    "101 steps": Bad(400, "API.INVALID_REQUEST", job(*[LOG] * 101)),
    "COMPUTE iterations over the per-job cap": Bad(400, "API.INVALID_REQUEST", job(*[{"action": "COMPUTE", "iterations": 100_000_000}] * 2)),
    "a TASK's timeoutSeconds above the task cap": Bad(400, "API.INVALID_REQUEST", {"jobType": "TASK", "payload": {"task": "jobweaver_site.examples.tasks.add", "args": [1, 2]}, "timeoutSeconds": 3601}),
    "maxRetryCount above the limit": Bad(400, "API.INVALID_REQUEST", job(maxRetryCount=26)),
    "timeoutSeconds above the limit": Bad(400, "API.INVALID_REQUEST", job(timeoutSeconds=86_401)),
    "priority 10": Bad(400, "API.INVALID_REQUEST", job(priority=10)),
    "a javascript: URL": Bad(400, "API.INVALID_REQUEST", job({"action": "HTTP_CALL", "url": "javascript:alert(1)", "latencyMs": 1})),
    "step action an object": Bad(400, "API.INVALID_REQUEST", job({"action": {}})),
    "unknown field": Bad(400, "API.INVALID_REQUEST", job(submittedBy="admin")),
    "priority above the threshold without permission": Bad(403, "API.FORBIDDEN", job(priority=9)),
    # --- the document itself ---------------------------------------------------------------------
    "malformed JSON": Bad(400, "API.INVALID_REQUEST", "{not json"),
    "empty body": Bad(400, "API.INVALID_REQUEST", ""),
    "not UTF-8": Bad(400, "API.INVALID_REQUEST", b'{"jobType": "\xff"}'),
    "duplicate keys": Bad(400, "API.INVALID_REQUEST", '{"jobType": "SIMULATION", "jobType": "TASK"}'),
    "NaN": Bad(400, "API.INVALID_REQUEST", '{"jobType": "SIMULATION", "priority": NaN}'),
    "an array": Bad(400, "API.INVALID_REQUEST", "[]"),
    "text/plain": Bad(400, "API.INVALID_REQUEST", job(), content_type="text/plain"),
    "a form": Bad(400, "API.INVALID_REQUEST", "jobType=SIMULATION", content_type="application/x-www-form-urlencoded"),
    "body over the limit": Bad(413, "API.PAYLOAD_TOO_LARGE", job({"action": "LOG", "message": "x" * 900}), settings={"JOBWEAVER_MAX_REQUEST_BYTES": 512}),
    "session-authenticated body over 2.5 MB": Bad(413, "API.PAYLOAD_TOO_LARGE", BIG_SESSION_BODY, auth="session"),
    "Content-Length not a number": Bad(400, "API.INVALID_REQUEST", job(), headers={"CONTENT_LENGTH": "12abc"}),
    # --- headers ---------------------------------------------------------------------------------
    "Idempotency-Key too long": Bad(400, "API.INVALID_REQUEST", job(), headers={"HTTP_IDEMPOTENCY_KEY": "k" * 256}),
    "Idempotency-Key with a control character": Bad(400, "API.INVALID_REQUEST", job(), headers={"HTTP_IDEMPOTENCY_KEY": "key\u0001"}),
    "X-Trace-Id with a space": Bad(400, "API.INVALID_REQUEST", job(), headers={"HTTP_X_TRACE_ID": "a b"}),
    # --- batches ---------------------------------------------------------------------------------
    "batch of 1,001": Bad(400, "API.INVALID_REQUEST", {"jobs": [job()] * 1001}, path="/api/jobs/batch"),
    "batch with one bad item": Bad(400, "API.INVALID_REQUEST", {"jobs": [job(), job(priority=-1)]}, path="/api/jobs/batch"),
    "batch not an array": Bad(400, "API.INVALID_REQUEST", {"jobs": {"0": job()}}, path="/api/jobs/batch"),
    "batch with an Idempotency-Key": Bad(400, "API.INVALID_REQUEST", {"jobs": [job()]}, path="/api/jobs/batch", headers={"HTTP_IDEMPOTENCY_KEY": "k"}),
    "batch over its body limit": Bad(413, "API.PAYLOAD_TOO_LARGE", {"jobs": [job()] * 50}, path="/api/jobs/batch", settings={"JOBWEAVER_MAX_BATCH_REQUEST_BYTES": 1024}),
    # --- query parameters ------------------------------------------------------------------------
    "?page=²": Bad(400, "API.INVALID_REQUEST", method="GET", path="/api/jobs?page=%C2%B2"),
    "a 5,000-digit page": Bad(400, "API.INVALID_REQUEST", method="GET", path="/api/jobs?page=" + "9" * 5000),
    "size above the page size limit": Bad(400, "API.INVALID_REQUEST", method="GET", path="/api/jobs?size=101"),
    "NUL in traceId": Bad(400, "API.INVALID_REQUEST", method="GET", path="/api/jobs?traceId=a%00b"),
    "NUL in type": Bad(400, "API.INVALID_REQUEST", method="GET", path="/api/jobs?type=SIM%00"),
    "createdAfter out of range": Bad(400, "API.INVALID_REQUEST", method="GET", path="/api/jobs?createdAfter=9999-12-31T23:59:59-05:00"),
    "unknown query parameter": Bad(400, "API.INVALID_REQUEST", method="GET", path="/api/jobs?where=1"),
    # --- routes, methods, media types, credentials -----------------------------------------------
    "unknown route under /api/": Bad(404, "API.JOB_NOT_FOUND", method="GET", path="/api/nope"),
    "unknown sub-route of a job": Bad(404, "API.JOB_NOT_FOUND", method="GET", path="/api/jobs/{job}/nope"),
    "POST to an unknown route with a session": Bad(404, "API.JOB_NOT_FOUND", job(), path="/api/admin", auth="session"),
    "a job id that is no UUID": Bad(404, "API.JOB_NOT_FOUND", method="GET", path="/api/jobs/..%2f..%2fetc"),
    "DELETE a job list": Bad(405, "API.INVALID_REQUEST", method="DELETE", path="/api/jobs"),
    "PUT a job": Bad(405, "API.INVALID_REQUEST", job(), method="PUT", path="/api/jobs/{job}"),
    "GET the batch endpoint": Bad(405, "API.INVALID_REQUEST", method="GET", path="/api/jobs/batch"),
    "Accept: text/html": Bad(406, "API.INVALID_REQUEST", method="GET", path="/api/jobs", headers={"HTTP_ACCEPT": "text/html"}),
    "anonymous": Bad(401, "API.UNAUTHENTICATED", job(), auth="anonymous"),
    "a token that does not exist": Bad(401, "API.UNAUTHENTICATED", job(), auth="bad-token"),
    "retry of a PENDING job": Bad(409, "API.INVALID_STATE_TRANSITION", path="/api/jobs/{job}/retry"),
}  # fmt: skip


@pytest.fixture
def existing_job() -> str:
    """A job of the requesting user, so id-based cases have something real to aim at."""
    owner = make_user("owner", *SUBMITTER)
    client = APIClient()
    client.force_authenticate(owner)
    response = client.post("/api/jobs", json.dumps(job()), content_type="application/json")
    assert response.status_code == 202
    return response.json()["jobId"], owner


def client_for(auth: str, owner) -> APIClient:
    if auth == "session":
        client = APIClient(enforce_csrf_checks=True)
        client.force_login(owner)
        return client
    client = APIClient()
    if auth == "token":
        client.credentials(
            HTTP_AUTHORIZATION=f"Token {token_for(owner, f'bad-inputs-{uuid.uuid4()}')}"
        )
    elif auth == "bad-token":
        client.credentials(HTTP_AUTHORIZATION="Token jw_not-a-real-token")
    return client


def test_the_table_is_long_enough():
    assert len(CASES) >= 40


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_bad_request_gets_its_error_and_persists_nothing(case: Bad, existing_job, settings):
    job_id, owner = existing_job
    for name, value in case.settings.items():
        setattr(settings, name, value)
    client = client_for(case.auth, owner)
    body = case.body
    if isinstance(body, dict):
        body = json.dumps(body)
    before = counts()

    response = client.generic(
        case.method,
        case.path.format(job=job_id),
        body if body is not None else "",
        content_type=case.content_type,
        **case.headers,
    )

    assert_error_body(response, case.status, case.code)
    assert "Traceback" not in response.content.decode(errors="replace")
    assert counts() == before
