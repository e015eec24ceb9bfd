"""The operator's actions on executions (API, admin, CLI): retry, cancel and run now.

Each is one transaction around a lifecycle transition (apps/scheduler/lifecycle.py); a retried
job is dispatched right after commit. Dispatch, rescue and the worker-driven transitions live in
dispatch.py, rescue.py and lifecycle.py.
"""

from __future__ import annotations

import uuid

from django.db import transaction

from apps.scheduler import lifecycle
from apps.scheduler.dispatch import dispatch_job_now
from apps.scheduler.models import JobExecution


@transaction.atomic
def execution_retry(*, job_id: uuid.UUID) -> JobExecution:
    """FAILED | CANCELLED → PENDING with a fresh retry budget; the attempt history stays."""
    execution = lifecycle.execution_retry(job_id=job_id)
    transaction.on_commit(lambda: dispatch_job_now(job_id))
    return execution


@transaction.atomic
def execution_cancel(*, job_id: uuid.UUID) -> JobExecution:
    """PENDING | DISPATCHED → CANCELLED at once; RUNNING → cancel requested (the worker stops
    at its next checkpoint and records CANCELLED). Never retried automatically."""
    return lifecycle.execution_cancel(job_id=job_id)


@transaction.atomic
def execution_run_now(*, job_id: uuid.UUID) -> JobExecution:
    """A delayed PENDING job (runAt or backoff) becomes due at once and is dispatched after
    commit; InvalidStateTransition when it is not PENDING or already due."""
    execution = lifecycle.execution_run_now(job_id=job_id)
    transaction.on_commit(lambda: dispatch_job_now(job_id))
    return execution
