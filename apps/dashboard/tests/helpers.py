"""Jobs in the states the cockpit shows, built through the real services (no worker)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from jobweaver.executor.services import attempt_finish, attempt_start
from jobweaver.jobs.models import Job
from jobweaver.scheduler.tests.factories import dispatched, execution_of, submitted_job

__all__ = [
    "dead_letter",
    "delayed_job",
    "execution_of",
    "fail_attempt",
    "failed_once",
    "submitted_job",
]


def dead_letter(error: str = "boom", *, log_lines: list[str] | None = None, **fields) -> Job:
    """A job whose only attempt failed with `error` and no retries left: FAILED."""
    job = submitted_job(maxRetryCount=0, **fields)
    fail_attempt(job, error, log_lines or [])
    assert execution_of(job.id).status == "FAILED"
    return job


def failed_once(error: str = "flaky") -> Job:
    """A job whose first attempt failed with retries left: PENDING, retrying after backoff."""
    job = submitted_job(maxRetryCount=3)
    fail_attempt(job, error, [])
    assert execution_of(job.id).status == "PENDING"
    return job


def delayed_job() -> Job:
    return submitted_job(runAt=(timezone.now() + timedelta(days=30)).isoformat())


def fail_attempt(job: Job, error: str, log_lines: list[str]) -> None:
    claimed = attempt_start(job_id=job.id, event_id=dispatched(job.id), worker_id="host:1:T")
    assert attempt_finish(
        claimed=claimed, outcome="FAILURE", error=error, steps_completed=0, log_lines=log_lines
    )
