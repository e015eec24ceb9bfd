"""The executor's hot path costs a fixed, small number of queries per job (issue "Fast"):
claim, run and record one job, whatever the job and however many came before it."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobweaver.executor.runner import attempt_execute
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.tests.factories import execution_of, live_executor, submitted_job

# attempt_start: one statement (UPDATE the execution, INSERT its attempt); attempt_finish: one
# statement (UPDATE the execution, INSERT the outbox event, UPDATE the attempt, NOTIFY the
# dispatcher). Progress of a last step is recorded by the ending, not on its own.
QUERIES_PER_JOB = 2

pytestmark = pytest.mark.django_db(transaction=True)


def dispatched(job) -> uuid.UUID:
    sent: list = []
    assert dispatch_due_jobs(job_ids=[job.id], publish=sent.extend) == [job.id]
    return uuid.UUID(sent[0].event_id)


@pytest.mark.parametrize("steps", [1, 1, 3])  # the same count the first time and after
def test_claim_run_and_record_one_job_in_a_fixed_number_of_queries(steps):
    job = submitted_job([{"action": "LOG", "message": f"step {n}"} for n in range(steps)])
    live_executor()  # after the submit: its fast path finds no credit and publishes nothing
    event_id = dispatched(job)

    with CaptureQueriesContext(connection) as queries:
        assert attempt_execute(job_id=job.id, event_id=event_id) == "SUCCESS"

    assert execution_of(job.id).status == "COMPLETED"
    statements = [q["sql"] for q in queries if q["sql"] not in ("BEGIN", "COMMIT")]
    # No transaction around them (each is atomic by itself); each step before the last
    # records its progress.
    assert [q["sql"] for q in queries].count("BEGIN") == 0
    assert len(statements) == QUERIES_PER_JOB + (steps - 1), [q[:80] for q in statements]


def test_a_run_job_task_sends_no_health_check_first():
    """Django's health check (CONN_HEALTH_CHECKS) would send `SELECT 1` at the first query of
    every task, a statement the capture above does not see (it goes around the cursor
    wrapper); run_job skips it (apps/executor/tasks.py), other tasks keep it."""
    from celery import current_app
    from celery.signals import task_prerun

    from jobweaver.executor.tasks import run_job
    from jobweaver.scheduler.tasks import dispatch_due_jobs_task

    connection.ensure_connection()
    for task, checks in ((run_job, False), (dispatch_due_jobs_task, True)):
        task_prerun.send(sender=current_app.tasks[task.name], task_id="t", args=(), kwargs={})
        assert connection.health_check_done is not checks, task.name
