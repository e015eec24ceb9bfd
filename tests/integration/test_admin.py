"""An operator revives a dead-lettered job from the Django admin, against real workers."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import JobExecution
from tests.stack import wait_for

pytestmark = pytest.mark.integration

FLAKY_ONCE_NO_RETRIES = {
    "jobType": "SIMULATION",
    "maxRetryCount": 0,
    "payload": {"steps": [{"action": "FLAKY", "failTimes": 1}]},
}


def wait_for_status(job_id: uuid.UUID, status: str, timeout: float = 30) -> JobExecution:
    return wait_for(
        lambda: JobExecution.objects.filter(job_id=job_id, status=status).first(),
        timeout=timeout,
        message=f"job {job_id} to be {status}",
    )


def outcomes(job_id: uuid.UUID) -> list[tuple[int, str]]:
    attempts = ExecutionAttempt.objects.filter(job_id=job_id).order_by("attempt")
    return list(attempts.values_list("attempt", "outcome"))


def post_retry_action(client: Client, job_id: uuid.UUID) -> list[str]:
    response = client.post(
        reverse("admin:jobweaver_jobs_job_changelist"),
        {"action": "retry_jobs", "_selected_action": [str(job_id)], "index": 0},
        follow=True,
    )
    assert response.status_code == 200
    return [str(message) for message in response.context["messages"]]


@pytest.fixture
def operator_client(live_db) -> Client:
    operator = get_user_model().objects.create_superuser(
        username=f"operator-{uuid.uuid4().hex[:10]}", email="", password=None
    )
    client = Client()
    client.force_login(operator)
    return client


def test_admin_retry_revives_a_dead_lettered_job(stack, live_db, operator_client):
    job = job_submit(spec=parse_job_request(FLAKY_ONCE_NO_RETRIES)).job
    failed = wait_for_status(job.id, "FAILED")
    assert failed.attempt_count == 1
    assert "failing" in failed.last_error
    assert outcomes(job.id) == [(1, "FAILURE")]

    shown = post_retry_action(operator_client, job.id)

    assert "Retried 1 job." in shown, shown
    completed = wait_for_status(job.id, "COMPLETED")
    assert completed.attempt_count == 2
    assert (completed.retry_count, completed.max_retries) == (0, 0)  # a fresh budget, unused
    assert completed.last_error == ""
    assert outcomes(job.id) == [(1, "FAILURE"), (2, "SUCCESS")]

    # A completed job is not retried: nothing changes and the operator is told why.
    shown = post_retry_action(operator_client, job.id)

    assert "Retried 1 job." not in shown, shown
    assert any(
        message.startswith("Skipped 1 job:") and str(job.id) in message and "COMPLETED" in message
        for message in shown
    ), shown
    unchanged = JobExecution.objects.get(job_id=job.id)
    assert (unchanged.status, unchanged.version) == ("COMPLETED", completed.version)
    assert outcomes(job.id) == [(1, "FAILURE"), (2, "SUCCESS")]
