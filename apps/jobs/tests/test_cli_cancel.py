"""`manage.py cancel_job` in-process, through `run_from_argv` as `manage.py` runs it: exit 0
when the job is cancelled (or asked to stop), 1 when it has already ended, 2 for a malformed or
unknown id, with one line on stderr."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from jobweaver.jobs.management.commands.cancel_job import Command
from jobweaver.scheduler.tests.factories import execution_of, finished, started, submitted_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def cancel_job(run_command):
    return lambda *args: run_command(Command, "cancel_job", *args)


def test_help_runs(cancel_job):
    result = cancel_job("--help")

    assert result.code == 0
    assert "job_id" in result.out


def test_a_pending_job_is_cancelled_at_once(cancel_job):
    # Due in a year: PENDING throughout (runAt must lie within JOBWEAVER_MAX_RUN_AT_DAYS).
    job = submitted_job(runAt=(timezone.now() + timedelta(days=365)).isoformat())

    result = cancel_job(str(job.id))

    assert (result.code, result.out, result.err) == (0, f"job {job.id} CANCELLED\n", "")
    execution = execution_of(job.id)
    assert (execution.status, execution.last_error) == ("CANCELLED", "cancelled")


def test_a_running_job_is_asked_to_stop(cancel_job):
    job = submitted_job()
    started(job.id)

    result = cancel_job(str(job.id))

    assert result.code == 0, result.err
    assert result.out == f"job {job.id}: cancellation requested; it stops at its next checkpoint\n"
    execution = execution_of(job.id)
    assert (execution.status, execution.cancel_requested) == ("RUNNING", True)


def test_a_job_that_has_ended_exits_1(cancel_job):
    job = submitted_job()
    finished(job.id)
    version = execution_of(job.id).version

    result = cancel_job(str(job.id))

    assert (result.code, result.out) == (1, "")
    assert result.err == (f"cancel_job: error: Job {job.id} is COMPLETED; it cannot be cancelled\n")
    assert (execution_of(job.id).status, execution_of(job.id).version) == ("COMPLETED", version)


@pytest.mark.parametrize("job_id", ["not-a-uuid", str(uuid.UUID(int=7))])
def test_a_malformed_or_unknown_id_exits_2(cancel_job, job_id):
    result = cancel_job(job_id)

    assert (result.code, result.out) == (2, "")
    assert result.err == f"cancel_job: error: Job {job_id} not found\n"
