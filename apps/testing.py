"""`jobweaver.testing`: JobWeaver's jobs run inline in a host project's own tests (ARCHITECTURE
§13a) — Celery's `task_always_eager`, done right: a job is written exactly as in production (its
row, its options, its events, in the caller's transaction), then run in this process by the
executor's own runner, attempt after attempt, as an executor would. No Kafka, no workers; the
waits between attempts (backoff, snooze, `run_after`) are skipped, so retries and snoozes play
out at once.

    # conftest.py of your project
    pytest_plugins = ["jobweaver.testing"]

    # test_billing.py
    def test_an_invoice_is_sent(jobweaver_eager):
        result = send_invoice.enqueue(42)   # runs as the enqueueing transaction commits
        assert send_invoice.get_result(result.id).return_value == "sent 42"

`run_jobs()` runs what waits, for tests that submit through the API or want to choose when.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import override_settings
from django.utils import timezone

from jobweaver.engine import claim
from jobweaver.executor import task_runner
from jobweaver.executor.runner import attempt_execute
from jobweaver.scheduler.models import ExecutionStatus, JobExecution
from jobweaver.workflows import canvas

# A run of `run_jobs` stops after this many attempts: a job snoozing for ever, say.
MAX_ATTEMPTS = 1000
BATCH = 50


def run_jobs(job_ids=None, *, max_attempts: int = MAX_ATTEMPTS) -> int:
    """Run PENDING jobs (these `job_ids`, or every one) here, until none is left PENDING:
    each ends COMPLETED, FAILED or CANCELLED, whatever retries and snoozes it takes. Delays are
    skipped. Returns how many attempts ran; RuntimeError past `max_attempts`."""
    ids = [uuid.UUID(str(job_id)) for job_id in job_ids] if job_ids is not None else None
    ran = 0
    # Every queue is served here; the due time is any time.
    queues = sorted(_queues(ids))
    with override_settings(JOBWEAVER_EXECUTOR_QUEUES=queues or ["default"]):
        while True:
            with transaction.atomic():
                claimed = claim.executions_claim(
                    limit=BATCH, job_ids=ids, due_by=timezone.now() + timedelta(days=3650)
                )
            if not claimed:
                return ran
            for one in claimed:
                if ran >= max_attempts:
                    raise RuntimeError(f"jobs still running after {max_attempts} attempts")
                attempt_execute(job_id=one.job_id, event_id=one.event_id)
                ran += 1


def _queues(job_ids) -> set[str]:
    # A workflow's WAITING jobs become PENDING as their dependencies complete, here too.
    pending = JobExecution.objects.filter(
        status__in=(ExecutionStatus.PENDING, ExecutionStatus.WAITING)
    )
    if job_ids is not None:
        pending = pending.filter(job_id__in=job_ids)
    return set(pending.values_list("queue_name", flat=True).distinct())


def _in_test_transaction_only() -> bool:
    """Whether every open atomic block is the test case's own (pytest-django's `db`): then
    the caller's work is as committed as it will ever be in this test."""
    return all(getattr(block, "_from_testcase", False) for block in connection.atomic_blocks)


def at_commit(function) -> None:
    """Run `function` when the caller's transaction commits — at once when the only
    transaction is the test's own, which never commits."""
    if connection.in_atomic_block and _in_test_transaction_only():
        function()
    else:
        transaction.on_commit(function)


@pytest.fixture
def jobweaver_eager(monkeypatch):
    """Every job enqueued through the Tasks API in this test runs inline as its enqueueing
    transaction commits (`run_jobs`), retries and snoozes included, and so does every
    workflow enqueued from Python (`parent_results` flowing); a task's function runs in
    the test's own thread, so it sees the test's rows. Returns `run_jobs`."""
    from jobweaver.tasks.backend import JobWeaverBackend

    enqueue = JobWeaverBackend.enqueue

    def eager_enqueue(self, task, args, kwargs):
        result = enqueue(self, task, args, kwargs)
        at_commit(lambda: run_jobs([result.id]))
        return result

    monkeypatch.setattr(JobWeaverBackend, "enqueue", eager_enqueue)
    # A workflow enqueued from Python runs whole: its jobs as their dependencies complete.
    monkeypatch.setattr(canvas, "after_enqueue", lambda ids: at_commit(lambda: run_jobs(ids)))
    monkeypatch.setattr(task_runner, "RUN_IN_CALLERS_THREAD", True)
    return run_jobs
