"""Duplicate, late and lost RunJob messages on the real broker and real executors: the event id
of a delivery is its idempotency key, so whatever Kafka delivers, a job's attempt runs once.

The tests dispatch by hand (`dispatch_due_jobs` with a publish function of their own) jobs whose
`runAt` lies in the future, so that neither the submit's fast path nor beat sends them.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from jobweaver.scheduler.dispatch import Delivery, celery_publisher, dispatch_due_jobs
from jobweaver.scheduler.models import JobExecution
from jobweaver.scheduler.rescue import rescue_expired_leases
from tests.integration.helpers import (
    assert_invariants,
    attempts_of,
    status_of,
    submit,
    token_client,
    wait_for_status,
)
from tests.stack import wait_for

pytestmark = [pytest.mark.integration]


def future_job(steps: list[dict]) -> str:
    run_at = (timezone.now() + timedelta(hours=1)).isoformat()
    return submit(token_client(), steps, runAt=run_at)


def dispatch(job_id: str, publish) -> Delivery:
    """Dispatch the job now through `publish`; returns its (job id, event id, partition)."""
    sent: list[Delivery] = []

    def recording(messages):
        sent.extend(messages)
        publish(messages)

    claimed = dispatch_due_jobs(
        now=timezone.now() + timedelta(hours=2), job_ids=[uuid.UUID(job_id)], publish=recording
    )
    assert claimed == [uuid.UUID(job_id)]
    [message] = sent
    return message


def wait_until_ignored(stack, job_id: str, event_id: str, count: int = 1) -> None:
    """An executor logged that it received the delivery and ignored it."""
    needle = f"delivery {event_id} of job {job_id} "

    def ignored() -> int:
        lines = [
            line
            for worker in stack.executors
            for line in worker.log_text().splitlines()
            if needle in line and "ignoring" in line
        ]
        return len(lines) >= count

    wait_for(ignored, timeout=30, message=f"an executor to ignore delivery {event_id}")


def test_a_message_delivered_twice_runs_once(stack, live_db):
    job_id = future_job(
        [{"action": "LOG", "message": "once"}, {"action": "SLEEP", "durationMs": 500}]
    )

    _, event_id, _ = dispatch(job_id, lambda messages: celery_publisher(messages + messages))

    wait_for_status(job_id, "COMPLETED", timeout=30)
    wait_until_ignored(stack, job_id, event_id)
    [attempt] = attempts_of(job_id)
    assert (str(attempt.event_id), attempt.outcome, attempt.log_lines) == (
        event_id,
        "SUCCESS",
        ["once"],
    )
    assert_invariants([job_id])


def test_a_redelivery_after_the_attempt_finished_does_not_run_again(stack, live_db):
    job_id = future_job([{"action": "LOG", "message": "once"}])
    message = dispatch(job_id, celery_publisher)
    wait_for_status(job_id, "COMPLETED", timeout=30)
    before = JobExecution.objects.get(job_id=job_id)
    [attempt_before] = attempts_of(job_id)

    celery_publisher([message])  # the same RunJob message, delivered again

    wait_until_ignored(stack, job_id, message[1])
    after = JobExecution.objects.get(job_id=job_id)
    assert (after.status, after.version, after.attempt_count) == ("COMPLETED", before.version, 1)
    [attempt_after] = attempts_of(job_id)
    assert attempt_after.finished_at == attempt_before.finished_at
    assert_invariants([job_id])


def test_a_lost_message_is_redelivered_and_turns_up_late_without_effect(stack, live_db):
    job_id = future_job([{"action": "LOG", "message": "after a lost message"}])
    lost = dispatch(job_id, lambda messages: None)  # Kafka never sees it
    assert status_of(job_id) == "DISPATCHED"

    # Time shrunk: rescue as it would once the dispatch lease has run out.
    beyond_lease = timezone.now() + timedelta(
        seconds=settings.JOBWEAVER_DISPATCH_TIMEOUT_SECONDS + 1
    )
    assert rescue_expired_leases(now=beyond_lease, job_ids=[uuid.UUID(job_id)]) == [
        uuid.UUID(job_id)
    ]

    # A redelivery, not an attempt (ARCHITECTURE §4): due at once, no retry used.
    wait_for_status(job_id, "COMPLETED", timeout=30)
    [attempt] = attempts_of(job_id)
    assert (attempt.attempt, attempt.outcome) == (1, "SUCCESS")
    assert str(attempt.event_id) != lost.event_id
    execution = JobExecution.objects.get(job_id=job_id)
    assert (execution.retry_count, execution.redelivery_count) == (0, 1)

    celery_publisher([lost])  # the lost message turns up after all

    wait_until_ignored(stack, job_id, lost.event_id)
    assert [a.outcome for a in attempts_of(job_id)] == ["SUCCESS"]
    assert status_of(job_id) == "COMPLETED"
    assert_invariants([job_id])
