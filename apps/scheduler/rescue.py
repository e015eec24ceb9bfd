"""Lease rescue (beat, every JOBWEAVER_RESCUE_INTERVAL_SECONDS): executions whose lease expired
move on through the engine's transitions (ARCHITECTURE §4).

A RUNNING execution whose lease expired lost its worker: its attempt is recorded LOST and the
retry policy decides (PENDING with backoff, or FAILED with a dead-letter event); a job whose
cancellation was requested ends CANCELLED. The fencing token is cleared, so whatever the lost
worker reports later matches no row and is logged as rejected.

A DISPATCHED execution whose dispatch lease expired was never started (its executor stopped or
the message was lost): it is a redelivery, not an attempt — PENDING again at once, no attempt
row, no retry used, counted in `redelivery_count`. A late message carries a cleared token and is
ignored by the executor.

Rows are claimed with FOR UPDATE SKIP LOCKED in batches, each batch its own transaction: a row
locked right now (a worker recording its outcome) is skipped until the next tick; a worker that
locks the row after the rescue sees the cleared token and changes nothing. Like River's job
rescuer, this goes through the engine's transitions, never through the executor's runtime.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from datetime import datetime

from django.db import transaction

from jobweaver.core import metrics
from jobweaver.core.db import drain_in_batches
from jobweaver.core.logcontext import log_context
from jobweaver.core.timeutil import iso
from jobweaver.engine.executions import (
    execution_lose,
    execution_redeliver,
    executions_lock_expired,
)
from jobweaver.scheduler.models import ExecutionStatus, JobExecution

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
    executions = executions_lock_expired(limit=batch_size, expired_by=expired_by, job_ids=job_ids)
    for execution in executions:
        metrics.count_on_commit(metrics.LEASES_RESCUED.labels(execution.status).inc)
        with log_context(trace_id=execution.job.trace_id, job_id=execution.job_id):
            _rescue_one(execution)
    return [execution.job_id for execution in executions]


def _rescue_one(execution: JobExecution) -> None:
    """Redeliver an unstarted delivery, or record a lost attempt and its failure decision
    (row locked by the batch)."""
    lease = iso(execution.lease_expires_at)
    event_id = execution.current_event_id
    if execution.status == ExecutionStatus.DISPATCHED:
        execution_redeliver(execution)
        logger.info(
            "job %s redelivered: no worker started delivery %s before its dispatch lease "
            "expired at %s (no attempt used)",
            execution.job_id,
            event_id,
            lease,
        )
        return
    error = f"worker lost: lease expired at {lease} without a heartbeat"
    attempt, worker_id = execution.attempt_count, execution.worker_id
    decision = execution_lose(execution, error=error)
    logger.warning(
        "job %s attempt %d LOST (worker %s, event %s): %s; %s",
        execution.job_id,
        attempt,
        worker_id or "none",
        event_id,
        error,
        decision.reason,
    )
