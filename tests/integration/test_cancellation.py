"""Cancellation on real workers, from the API and from `manage.py cancel_job`: a RUNNING job
stops within a second during a SLEEP step and is never retried; a PENDING job is cancelled at
once; a job that has ended cannot be cancelled."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from jobweaver.scheduler.models import JobExecution
from tests.integration.helpers import (
    assert_invariants,
    attempts_of,
    running_attempt,
    status_of,
    submit,
    token_client,
    wait_for_status,
)
from tests.stack import ROOT, child_environment

pytestmark = [pytest.mark.integration]

LONG_SLEEP = [{"action": "LOG", "message": "started"}, {"action": "SLEEP", "durationMs": 60000}]


def cancel_job(job_id: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "cancel_job", job_id],
        cwd=ROOT,
        env=child_environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def seconds_until_stopped(job_id: str, requested_at) -> float:
    [attempt] = attempts_of(job_id)
    assert (attempt.outcome, attempt.error_message) == ("CANCELLED", "cancelled")
    return (attempt.finished_at - requested_at).total_seconds()


def test_cancel_during_sleep_stops_the_job_within_a_second_and_nothing_retries_it(stack, live_db):
    client = token_client()
    job_id = submit(client, LONG_SLEEP, maxRetryCount=3)
    running_attempt(job_id)

    requested_at = timezone.now()
    response = client.post(f"/api/jobs/{job_id}/cancel")

    assert response.status_code == 200
    assert response.json()["status"] in ("RUNNING", "CANCELLED")  # RUNNING: asked to stop
    wait_for_status(job_id, "CANCELLED", timeout=10)
    stopped_after = seconds_until_stopped(job_id, requested_at)
    print(f"\ncancel during SLEEP: stopped {stopped_after:.2f} s after the request")
    assert stopped_after <= 1.0

    # Barrier: a later job that sleeps longer than a lease plus a rescue interval completes,
    # so dispatch and rescue ticks have passed since; the cancelled job stayed as it was.
    barrier_ms = int((settings.JOBWEAVER_LEASE_SECONDS + 1.5) * 1000)
    barrier = submit(client, [{"action": "SLEEP", "durationMs": barrier_ms}])
    wait_for_status(barrier, "COMPLETED", timeout=60)
    execution = JobExecution.objects.get(job_id=job_id)
    assert (execution.status, execution.retry_count, execution.attempt_count) == (
        "CANCELLED",
        0,
        1,
    )
    assert [a.outcome for a in attempts_of(job_id)] == ["CANCELLED"]
    assert client.get(f"/api/jobs/{job_id}").json()["status"] == "CANCELLED"
    assert_invariants([job_id, barrier])


def test_cancel_of_a_pending_job_is_immediate(stack, live_db):
    client = token_client()
    run_at = (timezone.now() + timedelta(hours=1)).isoformat()
    job_id = submit(client, [{"action": "LOG", "message": "never"}], runAt=run_at)

    response = client.post(f"/api/jobs/{job_id}/cancel")

    assert response.status_code == 200
    assert response.json()["status"] == "CANCELLED"
    assert status_of(job_id) == "CANCELLED"
    assert attempts_of(job_id) == []
    assert_invariants([job_id])


def test_cancel_of_a_job_that_has_ended_is_409(stack, live_db):
    client = token_client()
    job_id = submit(client, [{"action": "LOG", "message": "done"}])
    wait_for_status(job_id, "COMPLETED", timeout=30)

    response = client.post(f"/api/jobs/{job_id}/cancel")

    assert response.status_code == 409
    assert response.json()["errorCode"] == "API.INVALID_STATE_TRANSITION"
    assert response.json()["jobId"] == job_id
    assert status_of(job_id) == "COMPLETED"
    assert_invariants([job_id])


def test_cancel_job_command_stops_a_running_job(stack, live_db):
    client = token_client()
    job_id = submit(client, LONG_SLEEP, maxRetryCount=3)
    running_attempt(job_id)

    requested_at = timezone.now()
    result = cancel_job(job_id)

    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        f"job {job_id}: cancellation requested; it stops at its next checkpoint\n"
    )
    wait_for_status(job_id, "CANCELLED", timeout=10)
    stopped_after = seconds_until_stopped(job_id, requested_at)
    print(f"\ncancel_job during SLEEP: stopped {stopped_after:.2f} s after the command began")

    again = cancel_job(job_id)

    assert again.returncode == 1
    assert again.stderr == (
        f"cancel_job: error: Job {job_id} is CANCELLED; it cannot be cancelled\n"
    )
    assert_invariants([job_id])
