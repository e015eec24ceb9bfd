"""Lease rescue (beat, every JOBWEAVER_RESCUE_INTERVAL_SECONDS): executions whose lease expired
move on through the same transitions as a failure (ARCHITECTURE §4).

A RUNNING execution whose lease expired lost its worker: its attempt is recorded LOST and the
retry policy decides (PENDING with backoff, or FAILED with a dead-letter event); a job whose
cancellation was requested ends CANCELLED. The fencing token is cleared, so whatever the lost
worker reports later matches no row and is logged as rejected.

A DISPATCHED execution whose dispatch lease expired was never started. It still gets an attempt
row, numbered after the last one and keyed by the delivery's event id, with outcome LOST and an
empty worker id; if the message turns up after all, the executor finds its attempt and ignores
it.

Rows are claimed with FOR UPDATE SKIP LOCKED in batches, each batch its own transaction: a row
locked right now (a worker recording its outcome) is skipped until the next tick; a worker that
locks the row after the rescue sees the cleared token and changes nothing. Like River's job
rescuer, this goes through the lifecycle's transitions, never through the executor's runtime.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from datetime import datetime

from django.db import transaction

from apps.core.db import drain_in_batches
from apps.core.timeutil import iso
from apps.executor import ledger
from apps.scheduler import lifecycle
from apps.scheduler.models import ExecutionStatus, JobExecution

logger = logging.getLogger(__name__)

RESCUE_BATCH_SIZE = 100


def rescue_expired_leases(
    *,
    now: datetime | None = None,
    batch_size: int = RESCUE_BATCH_SIZE,
    job_ids: Iterable[uuid.UUID] | None = None,
) -> list[uuid.UUID]:
    """Move on every DISPATCHED or RUNNING execution whose lease expired; returns the job ids.
    `now` replaces the database clock (tests move it past a lease instead of waiting)."""
    job_ids = list(job_ids) if job_ids is not None else None
    return drain_in_batches(
        lambda: _rescue_batch(expired_by=now, batch_size=batch_size, job_ids=job_ids),
        batch_size,
    )


@transaction.atomic
def _rescue_batch(
    *, expired_by: datetime | None, batch_size: int, job_ids: list[uuid.UUID] | None
) -> list[uuid.UUID]:
    executions = lifecycle.executions_lock_expired(
        limit=batch_size, expired_by=expired_by, job_ids=job_ids
    )
    for execution in executions:
        _rescue_one(execution)
    return [execution.job_id for execution in executions]


def _rescue_one(execution: JobExecution) -> None:
    """Record the live attempt LOST and the failure decision (row locked by the batch)."""
    job, now = execution.job, execution.db_now
    lease = iso(execution.lease_expires_at)
    if execution.status == ExecutionStatus.RUNNING:
        error = f"worker lost: lease expired at {lease} without a heartbeat"
    else:
        error = f"delivery lost: no worker started it before its dispatch lease expired at {lease}"
        lifecycle.execution_count_attempt(execution)  # the attempt row takes the next number
    attempt = ledger.attempt_record_lost(
        job_id=execution.job_id,
        event_id=execution.current_event_id,
        attempt=execution.attempt_count,
        trace_id=job.trace_id,
        started_at=execution.dispatched_at or now,
        total_steps=len(job.steps),
        error=error,
        now=now,
    )
    decision = lifecycle.execution_lose(execution, error=error)
    logger.warning(
        "job %s attempt %d LOST (worker %s, event %s): %s; %s",
        execution.job_id,
        attempt.attempt,
        attempt.worker_id or "none",
        attempt.event_id,
        error,
        decision.reason,
    )
