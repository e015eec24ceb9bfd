"""Jobs in a given state, built through the real services (no worker, no broker: the publish
function only records what would have been sent)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.utils import timezone

from jobweaver.executor.services import ClaimedAttempt, attempt_finish, attempt_start
from jobweaver.jobs.models import Job
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler import flow
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.models import JobExecution

EXECUTOR = "testhost:4242"
WORKER = f"{EXECUTOR}:MainThread"


def submitted_job(steps: list[dict] | None = None, **fields) -> Job:
    body = {
        "jobType": "SIMULATION",
        "payload": {"steps": steps or [{"action": "SLEEP", "durationMs": 1000}]},
        **fields,
    }
    return job_submit(spec=parse_job_request(body)).job


def live_executor(
    worker_id: str = EXECUTOR, *, slots: int = 1000, partitions=(0,), queues=None
) -> str:
    """Register (or renew) an executor serving `queues` (by default the test stack's,
    JOBWEAVER_EXECUTOR_QUEUES), so flow control has credits to dispatch with."""
    flow.executor_heartbeat(
        worker_id=worker_id,
        queues=list(queues or settings.JOBWEAVER_EXECUTOR_QUEUES),
        slots=slots,
        partitions=list(partitions),
        joined=False,
    )
    return worker_id


def dispatched(job_id: uuid.UUID) -> uuid.UUID:
    """Dispatch the job (it must be due) to a live executor; returns the delivery's event id."""
    live_executor()
    sent: list = []
    assert dispatch_due_jobs(job_ids=[job_id], publish=sent.extend) == [job_id]
    return uuid.UUID(sent[0][1])


def dispatched_record(steps: list[dict], count: int) -> list[list[str | None]]:
    """Submit `count` jobs and dispatch them as one run-job record: [[job, event, trace], ...],
    as the executor's `run_jobs` task receives it."""
    jobs = [submitted_job(steps).id for _ in range(count)]
    live_executor()
    sent: list = []
    assert sorted(dispatch_due_jobs(job_ids=jobs, publish=sent.extend)) == sorted(jobs)
    return [[d.job_id, d.event_id, d.trace_id] for d in sent]


def started(job_id: uuid.UUID, worker_id: str = WORKER) -> ClaimedAttempt:
    """Dispatch the job and let a worker claim the delivery."""
    claimed = attempt_start(job_id=job_id, event_id=dispatched(job_id), worker_id=worker_id)
    assert claimed is not None
    return claimed


def finished(job_id: uuid.UUID, outcome: str = "SUCCESS", error: str = "") -> ClaimedAttempt:
    """Run one attempt of the job to the given outcome."""
    claimed = started(job_id)
    assert attempt_finish(
        claimed=claimed, outcome=outcome, error=error, steps_completed=0, log_lines=[]
    )
    return claimed


def execution_of(job_id: uuid.UUID) -> JobExecution:
    return JobExecution.objects.get(job_id=job_id)


def make_due(job_id: uuid.UUID) -> None:
    """Skip the backoff delay of a retry."""
    JobExecution.objects.filter(job_id=job_id).update(next_run_at=timezone.now())
