"""The lifecycle of job executions: create, dispatch, start, finish, retry (ARCHITECTURE §4).

Every transition is a conditional update under a row lock that checks the current status and,
for worker-driven transitions, the fencing token `current_event_id`: a late or duplicate
message can never move an execution backwards or finish it twice.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.core.errors import InvalidStateTransition, JobNotFound
from apps.core.kafka import JOB_COMPLETED, JOB_DEAD_LETTER, JOB_FAILED
from apps.core.timeutil import iso
from apps.outbox.services import outbox_enqueue
from apps.scheduler.models import ExecutionStatus, JobExecution
from apps.scheduler.retry import RetryDecision, policy_from_settings

logger = logging.getLogger(__name__)

RUN_JOB_TASK = "apps.executor.tasks.run_job"

# publish(messages) sends every (job_id, event_id) pair on run-job and returns once the broker
# has taken them all, or raises.
Publisher = Callable[[list[tuple[str, str]]], None]


def execution_create(
    *, job_id: uuid.UUID, priority: int, max_retries: int, run_at: datetime | None
) -> JobExecution:
    """Create the PENDING execution of a newly submitted job (inside the submit transaction)."""
    return JobExecution.objects.create(
        job_id=job_id,
        priority=priority,
        max_retries=max_retries,
        next_run_at=run_at or timezone.now(),
    )


# --- dispatch -----------------------------------------------------------------------------------


def celery_publisher(messages: list[tuple[str, str]]) -> None:
    """Send one run_job Celery message per job over Kafka (keyed by job id, so one job's
    messages stay in order on one partition), then wait until the broker confirmed them all."""
    from jobweaver_site.celery import app
    from jobweaver_site.celeryconfig import RUN_JOB_QUEUE
    from jobweaver_site.kafka_transport import KEY_HEADER

    with app.producer_or_acquire() as producer:
        for job_id, event_id in messages:
            app.send_task(
                RUN_JOB_TASK,
                args=[job_id, event_id],
                queue=RUN_JOB_QUEUE,
                routing_key=RUN_JOB_QUEUE,
                producer=producer,
                headers={KEY_HEADER: job_id},
            )
        producer.channel.confirm_deliveries()


def _drain_in_batches(
    claim_batch: Callable[[], list[uuid.UUID]], batch_size: int
) -> list[uuid.UUID]:
    """Run `claim_batch` (one transaction each) until a batch comes back short; all job ids."""
    claimed: list[uuid.UUID] = []
    while True:
        batch = claim_batch()
        claimed.extend(batch)
        if len(batch) < batch_size:
            return claimed


def dispatch_due_jobs(
    *,
    now: datetime | None = None,
    batch_size: int | None = None,
    job_ids: Iterable[uuid.UUID] | None = None,
    publish: Publisher | None = None,
) -> list[uuid.UUID]:
    """Claim every due PENDING execution and send it to the executors; returns the job ids.

    Drains all due work in batches of JOBWEAVER_DISPATCH_BATCH_SIZE, each batch its own
    transaction. `job_ids` limits the claim to some jobs (the fast path after a submit);
    `now` lets a caller decide what counts as due.
    """
    batch_size = batch_size or settings.JOBWEAVER_DISPATCH_BATCH_SIZE
    publish = publish or celery_publisher
    job_ids = list(job_ids) if job_ids is not None else None
    return _drain_in_batches(
        lambda: _dispatch_batch(
            now=now or timezone.now(), batch_size=batch_size, job_ids=job_ids, publish=publish
        ),
        batch_size,
    )


@transaction.atomic
def _dispatch_batch(
    *, now: datetime, batch_size: int, job_ids: list[uuid.UUID] | None, publish: Publisher
) -> list[uuid.UUID]:
    """Claim one batch with SELECT … FOR UPDATE SKIP LOCKED, mark it DISPATCHED, publish.

    Publishing happens before commit: if Kafka refuses, the transaction rolls back and the jobs
    stay PENDING. A message whose transaction then fails to commit carries an event id that
    never became current, so the executor's fenced claim ignores it. An executor that receives
    a message before the commit blocks on the row lock and sees the committed state.
    """
    due = JobExecution.objects.select_for_update(skip_locked=True).filter(
        status=ExecutionStatus.PENDING, next_run_at__lte=now
    )
    if job_ids is not None:
        due = due.filter(job_id__in=job_ids)
    executions = list(due.order_by("-priority", "next_run_at")[:batch_size])
    if not executions:
        return []
    dispatched_at = timezone.now()
    lease = dispatched_at + timedelta(seconds=settings.JOBWEAVER_DISPATCH_TIMEOUT_SECONDS)
    for execution in executions:
        execution.status = ExecutionStatus.DISPATCHED
        execution.current_event_id = uuid.uuid4()
        execution.dispatched_at = dispatched_at
        execution.lease_expires_at = lease
        execution.version += 1
    JobExecution.objects.bulk_update(
        executions,
        [
            "status",
            "current_event_id",
            "dispatched_at",
            "lease_expires_at",
            "version",
            "updated_at",
        ],
    )
    publish([(str(e.job_id), str(e.current_event_id)) for e in executions])
    return [e.job_id for e in executions]


def dispatch_job_now(job_id: uuid.UUID) -> None:
    """Fast path after a submit or retry commits: dispatch this job at once if it is due.

    Best effort: on any broker error the job stays PENDING and the next beat tick sends it.
    """
    try:
        dispatch_due_jobs(job_ids=[job_id])
    except Exception:  # the beat tick is the safety net; the error is logged with its traceback
        logger.warning(
            "fast-path dispatch of job %s failed; beat will retry", job_id, exc_info=True
        )


# --- executor-driven transitions (fenced by event id) -------------------------------------------


def _locked_live_execution(job_id: uuid.UUID, event_id: uuid.UUID, statuses) -> JobExecution | None:
    """Lock the job's execution row, then check the fencing token and status.

    The row is locked by job id alone on purpose: a delivery can arrive while the dispatcher
    that sent it still holds the row lock. Locking by id waits for that commit and then reads
    the committed row; a WHERE on the token would not match the old row version and would
    wrongly treat the delivery as stale.
    """
    execution = JobExecution.objects.select_for_update().filter(job_id=job_id).first()
    if execution is None or execution.current_event_id != event_id:
        return None
    if execution.status not in statuses:
        return None
    return execution


def execution_mark_running(*, job_id: uuid.UUID, event_id: uuid.UUID) -> JobExecution | None:
    """DISPATCHED → RUNNING for the holder of `event_id`; None when the token is stale.

    Must run inside the caller's transaction (it takes the execution's row lock).
    """
    execution = _locked_live_execution(job_id, event_id, [ExecutionStatus.DISPATCHED])
    if execution is None:
        return None
    now = timezone.now()
    execution.status = ExecutionStatus.RUNNING
    execution.started_at = now
    execution.attempt_count += 1
    execution.lease_expires_at = now + timedelta(seconds=settings.JOBWEAVER_LEASE_SECONDS)
    execution.version += 1
    execution.save(
        update_fields=[
            "status",
            "started_at",
            "attempt_count",
            "lease_expires_at",
            "version",
            "updated_at",
        ]
    )
    return execution


def execution_record_success(
    *, job_id: uuid.UUID, event_id: uuid.UUID, trace_id: str, now: datetime
) -> bool:
    """RUNNING → COMPLETED for the holder of `event_id`. Must run inside the caller's
    transaction; returns False (changing nothing) when the token is stale."""
    execution = _locked_live_execution(job_id, event_id, [ExecutionStatus.RUNNING])
    if execution is None:
        return False
    execution.status = ExecutionStatus.COMPLETED
    execution.finished_at = now
    execution.lease_expires_at = None
    execution.last_error = ""
    execution.version += 1
    execution.save(
        update_fields=[
            "status",
            "finished_at",
            "lease_expires_at",
            "last_error",
            "version",
            "updated_at",
        ]
    )
    outbox_enqueue(
        topic=JOB_COMPLETED,
        key=str(job_id),
        trace_id=trace_id,
        payload={
            "jobId": str(job_id),
            "eventId": str(event_id),
            "traceId": trace_id,
            "attempt": execution.attempt_count,
            "completedAt": iso(now),
        },
    )
    return True


def execution_record_failure(
    *,
    job_id: uuid.UUID,
    event_id: uuid.UUID,
    trace_id: str,
    error: str,
    retryable: bool,
    now: datetime,
    from_statuses=(ExecutionStatus.RUNNING,),
) -> RetryDecision | None:
    """A failed attempt: RUNNING → PENDING (retry with backoff) or → FAILED (dead letter).

    Must run inside the caller's transaction; returns None (changing nothing) when the token is
    stale. The retry decision and the dead-letter event commit together with the outcome. A job
    whose cancellation was requested ends CANCELLED instead: it is never retried automatically.
    """
    execution = _locked_live_execution(job_id, event_id, list(from_statuses))
    if execution is None:
        return None
    if execution.cancel_requested:
        _execution_end_cancelled(execution, now=now, reason=f"cancelled ({error})")
        return RetryDecision(retry=False, retry_count=execution.retry_count, reason="cancelled")
    decision = policy_from_settings().decide(
        retry_count=execution.retry_count,
        max_retries=execution.max_retries,
        retryable=retryable,
        now=now,
    )
    execution.last_error = error
    execution.retry_count = decision.retry_count
    execution.lease_expires_at = None
    execution.current_event_id = None
    execution.version += 1
    event = {
        "jobId": str(job_id),
        "eventId": str(event_id),
        "traceId": trace_id,
        "attempt": execution.attempt_count,
        "error": error,
        "retryable": retryable,
        "willRetry": decision.retry,
        "failedAt": iso(now),
    }
    if decision.retry:
        execution.status = ExecutionStatus.PENDING
        execution.next_run_at = decision.next_run_at
        event["nextRunAt"] = iso(decision.next_run_at)
    else:
        execution.status = ExecutionStatus.FAILED
        execution.finished_at = now
    execution.save(
        update_fields=[
            "status",
            "last_error",
            "retry_count",
            "lease_expires_at",
            "current_event_id",
            "next_run_at",
            "finished_at",
            "version",
            "updated_at",
        ]
    )
    outbox_enqueue(topic=JOB_FAILED, key=str(job_id), trace_id=trace_id, payload=event)
    if not decision.retry:
        outbox_enqueue(
            topic=JOB_DEAD_LETTER,
            key=str(job_id),
            trace_id=trace_id,
            payload={
                "jobId": str(job_id),
                "traceId": trace_id,
                "reason": f"{decision.reason}: {error}",
                "finalRetryCount": execution.retry_count,
                "attempts": execution.attempt_count,
                "failedAt": iso(now),
            },
        )
        logger.warning(
            "job %s dead-lettered after %d attempt(s): %s", job_id, execution.attempt_count, error
        )
    return decision


def execution_heartbeat(*, job_id: uuid.UUID, event_id: uuid.UUID) -> bool:
    """Extend the lease of a RUNNING attempt; False tells the worker its token is stale or the
    job was asked to cancel, so it must stop."""
    extended = JobExecution.objects.filter(
        job_id=job_id,
        current_event_id=event_id,
        status=ExecutionStatus.RUNNING,
        cancel_requested=False,
    ).update(
        lease_expires_at=timezone.now() + timedelta(seconds=settings.JOBWEAVER_LEASE_SECONDS),
        updated_at=timezone.now(),
    )
    return extended == 1


# --- lease rescue (beat) ------------------------------------------------------------------------

LIVE_STATUSES = (ExecutionStatus.DISPATCHED, ExecutionStatus.RUNNING)
RESCUE_BATCH_SIZE = 100


def rescue_expired_leases(
    *,
    now: datetime | None = None,
    batch_size: int = RESCUE_BATCH_SIZE,
    job_ids: Iterable[uuid.UUID] | None = None,
) -> list[uuid.UUID]:
    """Move on every DISPATCHED or RUNNING execution whose lease expired before `now` (its
    worker or its message was lost); returns the job ids.

    Each counts as a failed attempt with outcome LOST and goes through the same retry policy as
    a failure (`execution_record_failure`): PENDING with backoff, or FAILED with a dead-letter
    event; a job whose cancellation was requested ends CANCELLED. The fencing token is cleared,
    so whatever the lost worker reports later matches no row and is logged as rejected.

    A DISPATCHED execution whose dispatch lease expired was never started (the message was lost,
    or no worker took it within JOBWEAVER_DISPATCH_TIMEOUT_SECONDS). It still gets an attempt
    row, numbered after the last one and keyed by the delivery's event id, with outcome LOST and
    an empty worker id: the history shows what happened, attempt numbers stay 1..n, it counts
    against the retry budget as ARCHITECTURE §4 says, and if the message turns up after all the
    executor finds its attempt and ignores it.

    Claims rows with FOR UPDATE SKIP LOCKED in batches, each batch its own transaction: a row
    locked right now (a worker recording its outcome) is skipped and looked at again on the next
    tick; a worker that locks the row after the rescue sees the cleared token and changes
    nothing. `job_ids` limits the rescue to some jobs.
    """
    job_ids = list(job_ids) if job_ids is not None else None
    return _drain_in_batches(
        lambda: _rescue_batch(now=now or timezone.now(), batch_size=batch_size, job_ids=job_ids),
        batch_size,
    )


@transaction.atomic
def _rescue_batch(
    *, now: datetime, batch_size: int, job_ids: list[uuid.UUID] | None
) -> list[uuid.UUID]:
    expired = (
        JobExecution.objects.select_for_update(skip_locked=True, of=("self",))
        .select_related("job")
        .filter(status__in=LIVE_STATUSES, lease_expires_at__lt=now)
    )
    if job_ids is not None:
        expired = expired.filter(job_id__in=job_ids)
    executions = list(expired.order_by("lease_expires_at")[:batch_size])
    for execution in executions:
        _rescue_one(execution)
    return [execution.job_id for execution in executions]


def _rescue_one(execution: JobExecution) -> None:
    """Record the live attempt as LOST and the failure decision. Must run under the
    execution's row lock (taken by `_rescue_batch`)."""
    # The executor owns attempts and depends on this module, hence the import here.
    from apps.executor.services import attempt_record_lost

    job = execution.job
    now = timezone.now()
    lease = iso(execution.lease_expires_at)
    if execution.status == ExecutionStatus.RUNNING:
        error = f"worker lost: lease expired at {lease} without a heartbeat"
    else:
        error = f"delivery lost: no worker started it before its dispatch lease expired at {lease}"
        execution.attempt_count += 1  # the attempt row below takes the next number
        execution.save(update_fields=["attempt_count", "updated_at"])
    attempt = attempt_record_lost(
        job_id=execution.job_id,
        event_id=execution.current_event_id,
        attempt=execution.attempt_count,
        trace_id=job.trace_id,
        started_at=execution.dispatched_at or now,
        total_steps=len(job.steps),
        error=error,
        now=now,
    )
    decision = execution_record_failure(
        job_id=execution.job_id,
        event_id=execution.current_event_id,
        trace_id=job.trace_id,
        error=error,
        retryable=True,
        now=now,
        from_statuses=LIVE_STATUSES,
    )
    logger.warning(
        "job %s attempt %d LOST (worker %s, event %s): %s; %s",
        execution.job_id,
        attempt.attempt,
        attempt.worker_id or "none",
        attempt.event_id,
        error,
        decision.reason if decision else "unchanged",
    )


# --- operator actions ---------------------------------------------------------------------------


@transaction.atomic
def execution_retry(*, job_id: uuid.UUID) -> JobExecution:
    """FAILED | CANCELLED → PENDING with a fresh retry budget; the attempt history stays."""
    execution = JobExecution.objects.select_for_update().filter(job_id=job_id).first()
    if execution is None:
        raise JobNotFound(f"Job {job_id} not found", job_id=job_id)
    if execution.status not in (ExecutionStatus.FAILED, ExecutionStatus.CANCELLED):
        raise InvalidStateTransition(
            f"Job {job_id} is {execution.status}; only FAILED or CANCELLED jobs can be retried",
            job_id=job_id,
        )
    execution.status = ExecutionStatus.PENDING
    execution.retry_count = 0
    execution.next_run_at = timezone.now()
    execution.current_event_id = None
    execution.lease_expires_at = None
    execution.cancel_requested = False
    execution.finished_at = None
    execution.version = F("version") + 1
    execution.save()
    execution.refresh_from_db()
    transaction.on_commit(lambda: dispatch_job_now(job_id))
    return execution


@transaction.atomic
def execution_cancel(*, job_id: uuid.UUID) -> JobExecution:
    """PENDING | DISPATCHED → CANCELLED at once; RUNNING → cancel requested (the worker stops
    at its next checkpoint and records CANCELLED). A cancelled job is never retried
    automatically."""
    execution = JobExecution.objects.select_for_update().filter(job_id=job_id).first()
    if execution is None:
        raise JobNotFound(f"Job {job_id} not found", job_id=job_id)
    if execution.status in (ExecutionStatus.PENDING, ExecutionStatus.DISPATCHED):
        execution.status = ExecutionStatus.CANCELLED
        execution.current_event_id = None  # a message still in flight is fenced off
        execution.lease_expires_at = None
        execution.finished_at = timezone.now()
        execution.last_error = "cancelled"
    elif execution.status == ExecutionStatus.RUNNING:
        execution.cancel_requested = True
    else:
        raise InvalidStateTransition(
            f"Job {job_id} is {execution.status}; it cannot be cancelled", job_id=job_id
        )
    execution.version += 1
    execution.save()
    return execution


def execution_record_cancelled(*, job_id: uuid.UUID, event_id: uuid.UUID) -> bool:
    """RUNNING (cancel requested) → CANCELLED for the holder of `event_id`. Must run inside the
    caller's transaction; False when the token is stale."""
    execution = _locked_live_execution(job_id, event_id, [ExecutionStatus.RUNNING])
    if execution is None or not execution.cancel_requested:
        return False
    _execution_end_cancelled(execution, now=timezone.now())
    return True


def _execution_end_cancelled(
    execution: JobExecution, *, now: datetime, reason: str = "cancelled"
) -> None:
    """→ CANCELLED, clearing the fencing token so that whoever still holds it is fenced off.
    Must run under the execution's row lock."""
    execution.status = ExecutionStatus.CANCELLED
    execution.current_event_id = None
    execution.lease_expires_at = None
    execution.finished_at = now
    execution.last_error = reason
    execution.version += 1
    execution.save()


def execution_cancel_requested(*, job_id: uuid.UUID, event_id: uuid.UUID) -> bool:
    """True when the attempt holding `event_id` should stop: cancellation was requested or the
    token is no longer current."""
    return not JobExecution.objects.filter(
        job_id=job_id,
        current_event_id=event_id,
        status=ExecutionStatus.RUNNING,
        cancel_requested=False,
    ).exists()


def execution_release(*, job_id: uuid.UUID, event_id: uuid.UUID) -> bool:
    """RUNNING → PENDING for the holder of `event_id` whose worker is shutting down: due at
    once, retry count unchanged (the job did not fail). Must run inside the caller's
    transaction; False when the token is stale or a cancel was requested (the caller then
    records the cancellation instead). Dispatched again right after commit."""
    execution = _locked_live_execution(job_id, event_id, [ExecutionStatus.RUNNING])
    if execution is None or execution.cancel_requested:
        return False
    execution.status = ExecutionStatus.PENDING
    execution.next_run_at = timezone.now()
    execution.current_event_id = None
    execution.lease_expires_at = None
    execution.version += 1
    execution.save(
        update_fields=[
            "status",
            "next_run_at",
            "current_event_id",
            "lease_expires_at",
            "version",
            "updated_at",
        ]
    )
    transaction.on_commit(lambda: dispatch_job_now(job_id))
    return True
