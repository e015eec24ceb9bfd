"""The worker's start and completion, each one statement (executions.execution_start and
execution_complete): they write the rows the rest of the system reads — the execution, its
attempt, the JobCompleted event — with the values and formats the other transitions use, and a
stale or duplicate delivery writes nothing at all."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.conf import settings

from jobweaver.core.kafka import JOB_COMPLETED
from jobweaver.core.timeutil import iso
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.executor.services import attempt_finish, attempt_start
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.tests.factories import WORKER, dispatched, execution_of, submitted_job

pytestmark = pytest.mark.django_db(transaction=True)

STEPS = [{"action": "LOG", "message": "one"}, {"action": "LOG", "message": "two"}]


def test_a_start_runs_the_execution_and_opens_its_attempt_at_one_database_time():
    job = submitted_job(STEPS)
    event_id = dispatched(job.id)
    before = execution_of(job.id)

    claimed = attempt_start(job_id=job.id, event_id=event_id, worker_id=WORKER)

    execution = execution_of(job.id)
    attempt = ExecutionAttempt.objects.get(event_id=event_id)
    assert (claimed.attempt, claimed.trace_id) == (1, job.trace_id)
    assert (claimed.kind, claimed.instruction) == ("SIMULATION", {"steps": STEPS})
    assert execution.status == "RUNNING"
    assert (execution.attempt_count, execution.version) == (1, before.version + 1)
    assert execution.worker_id == WORKER.rpartition(":")[0]  # the executor process
    assert execution.lease_expires_at == execution.started_at + timedelta(
        seconds=settings.JOBWEAVER_LEASE_SECONDS
    )
    assert execution.started_at >= before.dispatched_at
    assert (attempt.job_id, attempt.attempt, attempt.outcome) == (job.id, 1, "RUNNING")
    assert (attempt.trace_id, attempt.worker_id) == (job.trace_id, WORKER)
    assert attempt.started_at == execution.started_at
    assert (attempt.total_steps, attempt.steps_completed, attempt.log_lines) == (2, 0, [])
    assert (attempt.error_message, attempt.result, attempt.finished_at) == ("", None, None)


def test_a_success_completes_closes_the_attempt_and_writes_the_completed_event():
    job = submitted_job(STEPS)
    claimed = attempt_start(job_id=job.id, event_id=dispatched(job.id), worker_id=WORKER)
    events_before = set(OutboxEvent.objects.values_list("id", flat=True))

    assert attempt_finish(
        claimed=claimed, outcome="SUCCESS", steps_completed=2, log_lines=["one", "two"]
    )

    execution = execution_of(job.id)
    attempt = ExecutionAttempt.objects.get(event_id=claimed.event_id)
    assert (execution.status, execution.lease_expires_at, execution.last_error) == (
        "COMPLETED",
        None,
        "",
    )
    assert (attempt.outcome, attempt.steps_completed, attempt.log_lines) == (
        "SUCCESS",
        2,
        ["one", "two"],
    )
    assert attempt.finished_at == execution.finished_at
    (event,) = OutboxEvent.objects.exclude(id__in=events_before)
    assert (event.topic, event.key, event.trace_id) == (JOB_COMPLETED, str(job.id), job.trace_id)
    assert event.published_at is None or event.published_at >= event.created_at
    assert event.payload == {
        "jobId": str(job.id),
        "eventId": str(claimed.event_id),
        "traceId": job.trace_id,
        "attempt": 1,
        "completedAt": iso(execution.finished_at),  # the format of every event's times
    }


def test_a_task_jobs_attempt_counts_no_steps():
    from jobweaver.jobs.services import job_submit
    from jobweaver.jobs.validation import parse_job_request

    body = {
        "jobType": "TASK",
        "payload": {"task": "jobweaver_site.examples.tasks.add", "args": [1, 2]},
    }
    job = job_submit(spec=parse_job_request(body)).job
    claimed = attempt_start(job_id=job.id, event_id=dispatched(job.id), worker_id=WORKER)

    assert (claimed.kind, claimed.instruction["task"]) == (
        "TASK",
        "jobweaver_site.examples.tasks.add",
    )
    assert ExecutionAttempt.objects.get(event_id=claimed.event_id).total_steps == 0


def test_a_stale_or_duplicate_delivery_writes_nothing():
    job = submitted_job(STEPS)
    event_id = dispatched(job.id)

    assert attempt_start(job_id=job.id, event_id=uuid.uuid4(), worker_id=WORKER) is None
    assert execution_of(job.id).status == "DISPATCHED"
    assert not ExecutionAttempt.objects.filter(job_id=job.id).exists()

    claimed = attempt_start(job_id=job.id, event_id=event_id, worker_id=WORKER)
    assert attempt_start(job_id=job.id, event_id=event_id, worker_id=WORKER) is None  # again
    assert ExecutionAttempt.objects.filter(job_id=job.id).count() == 1
    assert execution_of(job.id).attempt_count == 1

    assert attempt_finish(claimed=claimed, outcome="SUCCESS", steps_completed=2, log_lines=[])
    version, events = execution_of(job.id).version, OutboxEvent.objects.count()
    # The same success reported twice (a retried commit): refused, nothing written.
    assert not attempt_finish(claimed=claimed, outcome="SUCCESS", steps_completed=2, log_lines=[])
    assert (execution_of(job.id).version, OutboxEvent.objects.count()) == (version, events)
