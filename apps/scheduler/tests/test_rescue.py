"""Lease rescue on the real PostgreSQL: an execution whose worker or message was lost moves on
as a failed attempt with outcome LOST, and whatever the lost worker reports later is fenced off.

No worker runs here: the tests play the worker's part through the executor's services and move
`now` past the lease instead of waiting for it.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from jobweaver.engine.executions import execution_heartbeat, execution_should_stop
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.executor.services import attempt_finish, attempt_start
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.beat import beat_schedule_setup
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.invariants import check_invariants
from jobweaver.scheduler.models import JobExecution
from jobweaver.scheduler.rescue import rescue_expired_leases
from jobweaver.scheduler.services import execution_cancel
from jobweaver.scheduler.tasks import rescue_expired_leases_task
from jobweaver.scheduler.tests.factories import (
    WORKER,
    dispatched,
    execution_of,
    started,
    submitted_job,
)

pytestmark = pytest.mark.django_db


def after_lease(seconds: float = settings.JOBWEAVER_LEASE_SECONDS):
    return timezone.now() + timedelta(seconds=seconds + 1)


def outcomes(job_id) -> list[tuple[int, str, str]]:
    attempts = ExecutionAttempt.objects.filter(job_id=job_id).order_by("attempt")
    return list(attempts.values_list("attempt", "outcome", "worker_id"))


def events(job_id, topic: str) -> list[dict]:
    rows = OutboxEvent.objects.filter(topic=topic, key=str(job_id)).order_by("created_at")
    return [row.payload for row in rows]


def test_a_running_attempt_whose_lease_expired_is_lost_and_retried(caplog):
    job = submitted_job(maxRetryCount=2)
    claimed = started(job.id)

    assert rescue_expired_leases(now=timezone.now()) == []  # the lease is still live
    before = timezone.now()
    assert rescue_expired_leases(now=after_lease()) == [job.id]

    execution = execution_of(job.id)
    assert execution.status == "PENDING"
    assert execution.retry_count == 1
    assert execution.current_event_id is None
    assert execution.lease_expires_at is None
    assert execution.next_run_at >= before + timedelta(seconds=0.4)  # backoff 0.2 s * 2**1
    assert execution.last_error.startswith("worker lost: lease expired at ")
    assert outcomes(job.id) == [(1, "LOST", WORKER)]
    lost = ExecutionAttempt.objects.get(event_id=claimed.event_id)
    assert lost.finished_at is not None
    assert lost.error_message == execution.last_error
    [failed] = events(job.id, "job-failed")
    assert (failed["attempt"], failed["willRetry"], failed["eventId"]) == (
        1,
        True,
        str(claimed.event_id),
    )
    assert rescue_expired_leases(now=after_lease()) == []  # nothing left to rescue

    # The lost worker comes back: its heartbeat is refused, it is told to stop, and its late
    # outcome matches no row and is logged.
    assert execution_heartbeat(job_id=job.id, event_id=claimed.event_id) is False
    assert execution_should_stop(job_id=job.id, event_id=claimed.event_id) is True
    with caplog.at_level(logging.WARNING, logger="jobweaver.executor.services"):
        accepted = attempt_finish(
            claimed=claimed, outcome="SUCCESS", steps_completed=1, log_lines=[]
        )
    assert accepted is False
    assert f"late outcome SUCCESS of job {job.id} attempt 1 rejected by the fence" in caplog.text
    unchanged = execution_of(job.id)
    assert (unchanged.status, unchanged.version) == ("PENDING", execution.version)
    assert outcomes(job.id) == [(1, "LOST", WORKER)]
    assert check_invariants(job_ids=[job.id]) == []


def test_an_unstarted_delivery_is_redelivered_without_an_attempt_and_its_late_message_ignored():
    # ARCHITECTURE §4: an expired *dispatch* lease is a redelivery, not an attempt.
    job = submitted_job(maxRetryCount=0)  # a lost attempt would dead-letter it at once
    event_id = dispatched(job.id)

    assert rescue_expired_leases(now=after_lease()) == []  # within the dispatch lease
    late = after_lease(settings.JOBWEAVER_DISPATCH_TIMEOUT_SECONDS)
    assert rescue_expired_leases(now=late) == [job.id]

    execution = execution_of(job.id)
    assert (execution.status, execution.retry_count, execution.attempt_count) == ("PENDING", 0, 0)
    assert execution.redelivery_count == 1
    assert execution.current_event_id is None
    assert execution.last_error == ""
    assert outcomes(job.id) == []
    assert events(job.id, "job-failed") == []

    # The message turns up after all: its token is no longer current, nothing runs.
    assert attempt_start(job_id=job.id, event_id=event_id, worker_id=WORKER) is None
    assert execution_of(job.id).status == "PENDING"

    claimed = started(job.id)  # due at once: dispatched again with a fresh token
    assert claimed.event_id != event_id
    assert claimed.attempt == 1
    assert attempt_finish(claimed=claimed, outcome="SUCCESS", steps_completed=1, log_lines=[])
    assert outcomes(job.id) == [(1, "SUCCESS", WORKER)]
    assert check_invariants(job_ids=[job.id]) == []


def test_a_lost_attempt_without_retries_left_is_dead_lettered():
    job = submitted_job(maxRetryCount=0)
    started(job.id)

    assert rescue_expired_leases(now=after_lease(), job_ids=[job.id]) == [job.id]

    execution = execution_of(job.id)
    assert execution.status == "FAILED"
    assert execution.finished_at is not None
    [dead_letter] = events(job.id, "job-dead-letter")
    assert dead_letter["attempts"] == 1
    assert dead_letter["finalRetryCount"] == 0
    assert dead_letter["reason"].startswith("retries exhausted: worker lost")
    assert [event["willRetry"] for event in events(job.id, "job-failed")] == [False]
    assert check_invariants(job_ids=[job.id]) == []


def test_a_job_asked_to_cancel_whose_worker_was_lost_ends_cancelled_not_retried():
    job = submitted_job(maxRetryCount=3)
    started(job.id)
    execution_cancel(job_id=job.id)  # RUNNING: the worker is asked to stop, but it is gone

    assert rescue_expired_leases(now=after_lease()) == [job.id]

    execution = execution_of(job.id)
    assert execution.status == "CANCELLED"
    assert execution.retry_count == 0
    assert execution.last_error.startswith("cancelled (worker lost")
    assert outcomes(job.id) == [(1, "LOST", WORKER)]
    assert events(job.id, "job-failed") == []
    assert dispatch_due_jobs(job_ids=[job.id], publish=lambda messages: None) == []
    assert check_invariants(job_ids=[job.id]) == []


def test_a_failure_after_a_cancel_request_is_not_retried():
    job = submitted_job([{"action": "FAIL", "message": "boom"}], maxRetryCount=3)
    claimed = started(job.id)
    execution_cancel(job_id=job.id)

    assert attempt_finish(
        claimed=claimed, outcome="FAILURE", error="boom", steps_completed=0, log_lines=[]
    )

    execution = execution_of(job.id)
    assert (execution.status, execution.last_error) == ("CANCELLED", "cancelled (boom)")
    assert outcomes(job.id) == [(1, "FAILURE", WORKER)]
    assert events(job.id, "job-failed") == []
    assert check_invariants(job_ids=[job.id]) == []


def test_rescue_only_touches_expired_leases_of_the_jobs_asked_for():
    live, other = submitted_job(), submitted_job()
    started(live.id)
    started(other.id)

    assert rescue_expired_leases(now=after_lease(), job_ids=[live.id]) == [live.id]
    assert execution_of(other.id).status == "RUNNING"


def test_rescue_drains_every_expired_lease_in_batches():
    jobs = [submitted_job() for _ in range(5)]
    for job in jobs:
        started(job.id)

    rescued = rescue_expired_leases(
        now=after_lease(), batch_size=2, job_ids=[job.id for job in jobs]
    )

    assert sorted(rescued) == sorted(job.id for job in jobs)
    assert {execution_of(job.id).status for job in jobs} == {"PENDING"}


def test_rescue_runs_on_the_beat_schedule_every_rescue_interval():
    from django_celery_beat.models import PeriodicTask

    assert "jobweaver: rescue expired leases" in beat_schedule_setup()

    task = PeriodicTask.objects.get(name="jobweaver: rescue expired leases")
    assert task.task == "jobweaver.scheduler.tasks.rescue_expired_leases"
    assert task.interval.every == 500_000  # 0.5 s in the test settings
    assert task.interval.period == "microseconds"
    assert task.enabled


def test_the_beat_task_rescues_leases_that_expired_by_the_clock():
    job = submitted_job()
    started(job.id)
    JobExecution.objects.filter(job_id=job.id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert rescue_expired_leases_task() >= 1

    assert execution_of(job.id).status == "PENDING"
    assert outcomes(job.id) == [(1, "LOST", WORKER)]
