"""Helpers of the API tests: a user's client, the error body, and what a request persisted."""

from __future__ import annotations

from rest_framework.test import APIClient

from jobweaver.accounts.tests.helpers import SUBMITTER
from jobweaver.accounts.tests.helpers import make_user as _make_user
from jobweaver.jobs.models import Job
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.models import JobExecution


def api_client(username: str, *permissions: str, **extra) -> APIClient:
    """A client authenticated as a new user `username` holding `permissions` (by default what
    a submitter holds: add, change and view their own jobs)."""
    client = APIClient()
    client.force_authenticate(_make_user(username, *(permissions or SUBMITTER), **extra))
    return client


def assert_error_body(response, status: int, code: str) -> dict:
    """The response is the error body of ARCHITECTURE §8 with this status and code."""
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert {"timestamp", "status", "errorCode", "message", "jobId"} <= set(body)
    assert set(body) - {"timestamp", "status", "errorCode", "message", "jobId"} <= {"errors"}
    assert (body["status"], body["errorCode"]) == (status, code)
    assert body["message"]
    return body


def counts() -> tuple[int, int, int]:
    """(jobs, executions, outbox events): what a rejected request must leave unchanged."""
    return Job.objects.count(), JobExecution.objects.count(), OutboxEvent.objects.count()
