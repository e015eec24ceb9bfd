"""Running one delivery of a job: fenced claim, the steps, and the outcome (ARCHITECTURE §4, §5).

`attempt_execute` is what the run_job task calls. It claims the execution with the message's
event id (the fencing token), records an ExecutionAttempt keyed by that event id, runs the
steps, and records the outcome together with the retry/dead-letter decision in one transaction.
A duplicate or stale message changes nothing.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.core.db import DATABASE_UNAVAILABLE, retry_while_database_unavailable
from apps.executor import shutdown
from apps.executor.engine import (
    AttemptReleased,
    AttemptStopped,
    StepContext,
    StepFailed,
    run_steps,
)
from apps.executor.models import AttemptOutcome, ExecutionAttempt
from apps.jobs.selectors import job_get_for_execution
from apps.scheduler.services import (
    execution_cancel_requested,
    execution_heartbeat,
    execution_mark_running,
    execution_record_cancelled,
    execution_record_failure,
    execution_record_success,
    execution_release,
)

logger = logging.getLogger(__name__)


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"


@dataclass(frozen=True)
class ClaimedAttempt:
    job_id: uuid.UUID
    event_id: uuid.UUID
    attempt: int
    trace_id: str
    steps: list[dict]
    timeout_seconds: int


@transaction.atomic
def attempt_start(
    *, job_id: uuid.UUID, event_id: uuid.UUID, worker_id: str
) -> ClaimedAttempt | None:
    """Claim the execution for this delivery and record its attempt; None for a stale or
    duplicate delivery (its event id is not the current token, or it already ran)."""
    if ExecutionAttempt.objects.filter(event_id=event_id).exists():
        logger.info(
            "delivery %s of job %s already has its attempt; ignoring the duplicate",
            event_id,
            job_id,
        )
        return None
    execution = execution_mark_running(job_id=job_id, event_id=event_id)
    if execution is None:
        logger.info("delivery %s of job %s is stale (fenced); ignoring it", event_id, job_id)
        return None
    job = job_get_for_execution(job_id=job_id)
    ExecutionAttempt.objects.create(
        event_id=event_id,
        job_id=job_id,
        attempt=execution.attempt_count,
        trace_id=job.trace_id,
        worker_id=worker_id,
        started_at=execution.started_at,
        total_steps=len(job.steps),
    )
    return ClaimedAttempt(
        job_id=job_id,
        event_id=event_id,
        attempt=execution.attempt_count,
        trace_id=job.trace_id,
        steps=job.steps,
        timeout_seconds=job.timeout_seconds,
    )


def attempt_record_progress(
    *, event_id: uuid.UUID, steps_completed: int, log_lines: list[str]
) -> None:
    ExecutionAttempt.objects.filter(event_id=event_id, outcome=AttemptOutcome.RUNNING).update(
        steps_completed=steps_completed, log_lines=list(log_lines)
    )


@transaction.atomic
def attempt_finish(
    *,
    claimed: ClaimedAttempt,
    outcome: str,
    error: str = "",
    retryable: bool = True,
    steps_completed: int,
    log_lines: list[str],
) -> bool:
    """Record the outcome and the scheduler's decision in one transaction. Returns False when
    the fence rejected it (the attempt was rescued or cancelled meanwhile): nothing changes."""
    now = timezone.now()
    if outcome == AttemptOutcome.SUCCESS:
        accepted = execution_record_success(
            job_id=claimed.job_id, event_id=claimed.event_id, trace_id=claimed.trace_id, now=now
        )
    else:
        accepted = (
            execution_record_failure(
                job_id=claimed.job_id,
                event_id=claimed.event_id,
                trace_id=claimed.trace_id,
                error=error,
                retryable=retryable,
                now=now,
            )
            is not None
        )
    if not accepted:
        logger.warning(
            "late outcome %s of job %s attempt %d rejected by the fence (event %s)",
            outcome,
            claimed.job_id,
            claimed.attempt,
            claimed.event_id,
        )
        return False
    ExecutionAttempt.objects.filter(
        event_id=claimed.event_id, outcome=AttemptOutcome.RUNNING
    ).update(
        outcome=outcome,
        error_message=error,
        finished_at=now,
        steps_completed=steps_completed,
        log_lines=list(log_lines),
    )
    return True


def attempt_record_lost(
    *,
    job_id: uuid.UUID,
    event_id: uuid.UUID,
    attempt: int,
    trace_id: str,
    started_at: datetime,
    total_steps: int,
    error: str,
    now: datetime,
) -> ExecutionAttempt:
    """Mark the attempt of delivery `event_id` LOST (its lease expired); for a delivery that no
    worker ever started, create its attempt row numbered `attempt`. Called by the scheduler's
    lease rescue under the execution's row lock, in the transaction that records the decision.
    """
    ExecutionAttempt.objects.filter(event_id=event_id, outcome=AttemptOutcome.RUNNING).update(
        outcome=AttemptOutcome.LOST, error_message=error, finished_at=now
    )
    lost, _ = ExecutionAttempt.objects.get_or_create(
        event_id=event_id,
        defaults={
            "job_id": job_id,
            "attempt": attempt,
            "trace_id": trace_id,
            "worker_id": "",
            "started_at": started_at,
            "finished_at": now,
            "outcome": AttemptOutcome.LOST,
            "error_message": error,
            "total_steps": total_steps,
        },
    )
    return lost


RELEASED_MESSAGE = (
    "released: the worker shut down before the attempt finished (not counted as a retry)"
)

# How often a running attempt looks for a cancellation request (a cheap indexed read).
CANCEL_POLL_SECONDS = 0.25


@transaction.atomic
def attempt_cancelled(
    *, claimed: ClaimedAttempt, steps_completed: int, log_lines: list[str]
) -> bool:
    """Record a cooperative cancellation; False when the attempt no longer holds the token."""
    if not execution_record_cancelled(job_id=claimed.job_id, event_id=claimed.event_id):
        return False
    ExecutionAttempt.objects.filter(
        event_id=claimed.event_id, outcome=AttemptOutcome.RUNNING
    ).update(
        outcome=AttemptOutcome.CANCELLED,
        error_message="cancelled",
        finished_at=timezone.now(),
        steps_completed=steps_completed,
        log_lines=list(log_lines),
    )
    return True


@transaction.atomic
def attempt_release(*, claimed: ClaimedAttempt, steps_completed: int, log_lines: list[str]) -> bool:
    """Hand a running job back at worker shutdown (see apps/executor/shutdown.py): the job is
    PENDING again at once, without using a retry; the attempt is recorded LOST."""
    if not execution_release(job_id=claimed.job_id, event_id=claimed.event_id):
        return False
    ExecutionAttempt.objects.filter(
        event_id=claimed.event_id, outcome=AttemptOutcome.RUNNING
    ).update(
        outcome=AttemptOutcome.LOST,
        error_message=RELEASED_MESSAGE,
        finished_at=timezone.now(),
        steps_completed=steps_completed,
        log_lines=list(log_lines),
    )
    return True


class _Checkpoint:
    """Called between steps and inside long steps: enforces the attempt's timeout, notices
    cancellation within CANCEL_POLL_SECONDS, and heartbeats about every third of the lease."""

    def __init__(self, claimed: ClaimedAttempt):
        self.claimed = claimed
        self.started = time.monotonic()
        self.heartbeat_interval = settings.JOBWEAVER_LEASE_SECONDS / 3
        self.next_heartbeat = self.started + self.heartbeat_interval
        self.next_cancel_poll = self.started + CANCEL_POLL_SECONDS

    def __call__(self) -> None:
        now = time.monotonic()
        if shutdown.grace_expired():
            raise AttemptReleased("the worker is shutting down")
        if now - self.started > self.claimed.timeout_seconds:
            raise StepFailed(
                f"timed out after {self.claimed.timeout_seconds} s (timeoutSeconds)", retryable=True
            )
        ids = {"job_id": self.claimed.job_id, "event_id": self.claimed.event_id}
        try:
            if now >= self.next_heartbeat:
                self.next_heartbeat = now + self.heartbeat_interval
                self.next_cancel_poll = now + CANCEL_POLL_SECONDS
                if not execution_heartbeat(**ids):
                    raise AttemptStopped("lease lost or cancellation requested")
            elif now >= self.next_cancel_poll:
                self.next_cancel_poll = now + CANCEL_POLL_SECONDS
                if execution_cancel_requested(**ids):
                    raise AttemptStopped("lease lost or cancellation requested")
        except DATABASE_UNAVAILABLE as exc:
            # Keep working through a short outage and heartbeat again soon; if the lease runs
            # out meanwhile, the rescue takes the job and the fence refuses our outcome.
            logger.warning("heartbeat of job %s failed: %s", self.claimed.job_id, exc)
            connection.close()
            self.next_heartbeat = now + min(1.0, self.heartbeat_interval)


# How long a worker keeps retrying a claim or an outcome while PostgreSQL is unavailable (a
# restart takes about a second); the lease rescue covers anything longer.
DATABASE_RETRY_SECONDS = 20.0


def _durably(record: Callable[..., bool], kwargs: dict, what: str) -> bool:
    """Record an attempt's end, retrying through a short database outage. Safe to repeat: each
    recorder is one fenced transaction, so a retry after a lost commit is simply refused."""
    claimed = kwargs["claimed"]
    return retry_while_database_unavailable(
        lambda: record(**kwargs),
        what=f"{what} of job {claimed.job_id} attempt {claimed.attempt}",
        timeout=DATABASE_RETRY_SECONDS,
    )


def attempt_execute(*, job_id: uuid.UUID, event_id: uuid.UUID) -> str | None:
    """Run one delivery of a job end to end; returns the recorded outcome, or None if the
    delivery was a duplicate or stale."""
    worker_id = worker_identity()
    claimed = retry_while_database_unavailable(
        lambda: attempt_start(job_id=job_id, event_id=event_id, worker_id=worker_id),
        what=f"claim of job {job_id}",
        timeout=DATABASE_RETRY_SECONDS,
    )
    if claimed is None:
        return None
    ctx = StepContext(
        job_id=str(job_id),
        attempt=claimed.attempt,
        trace_id=claimed.trace_id,
        checkpoint=_Checkpoint(claimed),
    )
    progress = {"steps": 0}

    def on_step_done(count: int) -> None:
        progress["steps"] = count
        try:
            attempt_record_progress(
                event_id=event_id, steps_completed=count, log_lines=ctx.log_lines
            )
        except DATABASE_UNAVAILABLE as exc:  # progress is informative; the outcome is not
            logger.warning("progress of job %s not recorded: %s", job_id, exc)
            connection.close()

    def ending() -> dict:
        """What every recorder of an attempt's end needs."""
        return {
            "claimed": claimed,
            "steps_completed": progress["steps"],
            "log_lines": ctx.log_lines,
        }

    outcome, error, retryable = AttemptOutcome.SUCCESS, "", True
    try:
        run_steps(claimed.steps, ctx, on_step_done)
    except StepFailed as failure:
        outcome, error, retryable = AttemptOutcome.FAILURE, failure.message, failure.retryable
    except AttemptReleased:
        kept = ending()
        if _durably(attempt_release, kept, "release"):
            logger.info("job %s attempt %d released at shutdown", job_id, claimed.attempt)
            return AttemptOutcome.LOST
        if _durably(attempt_cancelled, kept, "cancellation"):
            return AttemptOutcome.CANCELLED
        return None
    except AttemptStopped as stop:
        kept = ending()
        if _durably(attempt_cancelled, kept, "cancellation"):
            logger.info("job %s attempt %d cancelled", job_id, claimed.attempt)
            return AttemptOutcome.CANCELLED
        logger.warning(
            "job %s attempt %d stopped (%s) and rejected by the fence: event %s is no longer "
            "current (the lease expired and the job was rescued); nothing recorded",
            job_id,
            claimed.attempt,
            stop.reason,
            event_id,
        )
        return None
    _durably(
        attempt_finish,
        {**ending(), "outcome": outcome, "error": error, "retryable": retryable},
        "outcome",
    )
    logger.info("job %s attempt %d: %s %s", job_id, claimed.attempt, outcome, error)
    return outcome
