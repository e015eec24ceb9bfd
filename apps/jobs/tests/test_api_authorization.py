"""Who may do what in the API (ARCHITECTURE §8, OWASP API1/API5): a job of another user is not
found (404) for reads and actions alike; an operation without its permission is 403;
anonymous is 401; staff status alone grants nothing, `jobs.view_all_jobs` shows every user's
jobs and `jobs.operate_all_jobs` acts on them (§17)."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user, token_for
from jobweaver.jobs.tests.api_helpers import api_client, assert_error_body, counts
from jobweaver.scheduler.models import JobExecution

pytestmark = pytest.mark.django_db

BODY = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
UNKNOWN = "4b0e6c1e-4bd4-4bbf-9c4e-1b8d0d1f6d7a"


def token_client(username: str, *permissions: str, **extra) -> APIClient:
    client = APIClient()
    key = token_for(make_user(username, *permissions, **extra))
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def submit(client: APIClient) -> str:
    response = client.post("/api/jobs", json.dumps(BODY), content_type="application/json")
    assert response.status_code == 202, response.content
    return response.json()["jobId"]


def every_operation(job_id: str) -> list[tuple[str, str, dict | None]]:
    return [
        ("get", "/api/jobs", None),
        ("post", "/api/jobs", BODY),
        ("post", "/api/jobs/batch", {"jobs": [BODY]}),
        ("get", f"/api/jobs/{job_id}", None),
        ("get", f"/api/jobs/{job_id}/attempts", None),
        ("post", f"/api/jobs/{job_id}/retry", None),
        ("post", f"/api/jobs/{job_id}/cancel", None),
        ("get", "/api/stats", None),
    ]


def call(client: APIClient, method: str, path: str, body: dict | None):
    if method == "get":
        return client.get(path)
    return client.post(path, json.dumps(body or {}), content_type="application/json")


@pytest.mark.parametrize(
    "path",
    ["/api/jobs/{id}", "/api/jobs/{id}/attempts", "/api/jobs/{id}/retry", "/api/jobs/{id}/cancel"],
)
def test_user_a_cannot_read_retry_or_cancel_user_bs_job(path):
    job_id = submit(token_client("bob", *SUBMITTER))
    alice = token_client("alice", *SUBMITTER)

    method = "get" if path.count("/") == 3 or path.endswith("attempts") else "post"
    response = call(alice, method, path.format(id=job_id), None)

    body = assert_error_body(response, 404, "API.JOB_NOT_FOUND")
    # The same answer as for a job that does not exist at all: nothing to learn by probing.
    unknown = call(alice, method, path.format(id=UNKNOWN), None).json()
    assert body["message"].replace(job_id, "ID") == unknown["message"].replace(UNKNOWN, "ID")
    assert JobExecution.objects.get(job_id=job_id).status == "PENDING"


def test_user_a_does_not_see_user_bs_jobs_in_lists_or_stats():
    submit(token_client("bob", *SUBMITTER))
    alice = token_client("alice", *SUBMITTER)
    assert alice.get("/api/jobs").json()["totalElements"] == 0
    assert sum(alice.get("/api/stats").json()["countsByStatus"].values()) == 0


@pytest.mark.parametrize(
    ("method", "path", "body", "granted"),
    [
        ("post", "/api/jobs", BODY, ()),
        ("post", "/api/jobs/batch", {"jobs": [BODY]}, ()),
        ("post", "/api/jobs/{id}/retry", None, ("jobweaver_jobs.add_job",)),
        ("post", "/api/jobs/{id}/cancel", None, ("jobweaver_jobs.add_job",)),
    ],
)
def test_an_operation_without_its_permission_is_403_and_changes_nothing(
    method, path, body, granted
):
    owner = make_user("carol", "jobweaver_jobs.add_job")
    client = APIClient()
    client.force_authenticate(owner)
    job_id = submit(client)
    before = counts()
    limited = token_client("dave", *granted)

    response = call(limited, method, path.format(id=job_id), body)

    assert_error_body(response, 403, "API.FORBIDDEN")
    assert "missing permission" in response.json()["message"]
    assert counts() == before
    assert JobExecution.objects.get(job_id=job_id).status == "PENDING"


def test_a_submitter_without_change_job_cannot_cancel_even_their_own_job():
    client = token_client("erin", "jobweaver_jobs.add_job")
    job_id = submit(client)
    assert_error_body(
        call(client, "post", f"/api/jobs/{job_id}/cancel", None), 403, "API.FORBIDDEN"
    )


def test_anonymous_gets_401_on_every_operation():
    job_id = submit(api_client("frank"))
    before = counts()
    for method, path, body in every_operation(job_id):
        response = call(APIClient(), method, path, body)
        assert_error_body(response, 401, "API.UNAUTHENTICATED")
        assert response["WWW-Authenticate"] == "Token", path
    assert counts() == before


def test_staff_without_view_all_jobs_sees_only_their_own_jobs():
    others = submit(token_client("grace", *SUBMITTER))
    staff = token_client("heidi", *SUBMITTER, is_staff=True)
    own = submit(staff)

    listed = [job["jobId"] for job in staff.get("/api/jobs").json()["jobs"]]

    assert listed == [own]
    assert_error_body(staff.get(f"/api/jobs/{others}"), 404, "API.JOB_NOT_FOUND")
    assert_error_body(
        call(staff, "post", f"/api/jobs/{others}/cancel", None), 404, "API.JOB_NOT_FOUND"
    )


def test_view_all_jobs_sees_every_users_jobs_and_operate_all_jobs_acts_on_them():
    others = submit(token_client("ivan", *SUBMITTER))
    auditor = token_client("kim", *SUBMITTER, "jobweaver_jobs.view_all_jobs")
    operator = token_client(
        "judy", *SUBMITTER, "jobweaver_jobs.view_all_jobs", "jobweaver_jobs.operate_all_jobs"
    )

    assert others in [job["jobId"] for job in auditor.get("/api/jobs").json()["jobs"]]
    assert auditor.get(f"/api/jobs/{others}").status_code == 200
    # Seeing another's job is not acting on it (§17).
    assert_error_body(auditor.post(f"/api/jobs/{others}/cancel"), 403, "API.FORBIDDEN")
    assert JobExecution.objects.get(job_id=others).status == "PENDING"
    assert operator.post(f"/api/jobs/{others}/cancel").json()["status"] == "CANCELLED"
    assert operator.get("/api/stats").json()["countsByStatus"]["CANCELLED"] == 1
