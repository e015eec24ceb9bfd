"""Reads of jobs, with their execution state and attempts."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from apps.core.errors import InvalidRequest, JobNotFound
from apps.executor.selectors import attempts_for_jobs
from apps.jobs.models import Job
from apps.jobs.representation import job_to_dict
from apps.scheduler.models import ExecutionStatus


def parse_job_id(raw: str | uuid.UUID) -> uuid.UUID:
    if isinstance(raw, uuid.UUID):
        return raw
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        raise JobNotFound(f"Job {raw} not found", job_id=raw) from None


def _visible_jobs(user) -> QuerySet[Job]:
    jobs = Job.objects.select_related("execution")
    if user is not None and not (user.is_staff or user.is_superuser):
        jobs = jobs.filter(submitted_by=user)
    return jobs


def job_get(*, job_id: str | uuid.UUID, user=None) -> Job:
    """A job visible to `user` (staff see all; others their own), or JobNotFound."""
    parsed = parse_job_id(job_id)
    job = _visible_jobs(user).filter(id=parsed).first()
    if job is None:
        raise JobNotFound(f"Job {parsed} not found", job_id=parsed)
    return job


def job_detail(*, job_id: str | uuid.UUID, user=None) -> dict:
    """The job detail of ARCHITECTURE §8 (the API's and `submit_job --json`'s), attempts oldest
    first, for a job visible to `user`; JobNotFound otherwise."""
    job = job_get(job_id=job_id, user=user)
    return job_to_dict(job, attempts_for_jobs(job_ids=[job.id])[job.id])


def job_get_for_execution(*, job_id: uuid.UUID) -> Job:
    return Job.objects.get(id=job_id)


def job_list(
    *,
    user=None,
    status: str | None = None,
    job_type: str | None = None,
    page: int = 0,
    size: int = 20,
) -> tuple[list[Job], int]:
    """One page of jobs, newest first, and the total count after filters."""
    jobs = _visible_jobs(user)
    if status:
        if status not in ExecutionStatus.values:
            raise InvalidRequest(
                f"status must be one of {', '.join(ExecutionStatus.values)}, got {status!r}"
            )
        jobs = jobs.filter(execution__status=status)
    if job_type:
        jobs = jobs.filter(job_type=job_type)
    total = jobs.count()
    return list(jobs.order_by("-created_at", "id")[page * size : (page + 1) * size]), total
