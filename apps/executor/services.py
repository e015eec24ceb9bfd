"""The executor's transactions: claim a delivery, and record how its attempt ended.

Each is one transition of the engine (apps/engine/executions.py), which records the attempt's
row with it, so an attempt's row and its execution's status never disagree. A stale or
duplicate delivery changes nothing: the fence refuses it.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from django.db import transaction

from jobweaver.conf import settings
from jobweaver.core import metrics
from jobweaver.core.groupcommit import GroupCommit
from jobweaver.engine import executions
from jobweaver.engine.ledger import AttemptReport
from jobweaver.scheduler.dispatch import dispatch_job_now

logger = logging.getLogger(__name__)

RELEASED_MESSAGE = executions.RELEASED_MESSAGE


@dataclass(frozen=True)
class ClaimedAttempt:
    job_id: uuid.UUID
    event_id: uuid.UUID
    attempt: int
    trace_id: str
    kind: str  # the job's kind (apps/jobs/kinds/): its runner is apps/executor/runners.py's
    instruction: dict  # what that runner runs, e.g. {"steps": [...]}
    timeout_seconds: int
    traceparent: str = ""  # the submit's W3C traceparent (apps/core/tracing.py)
    # When the process pool kills the attempt's child (§13a); None: timeout_seconds plus
    # JOBWEAVER_HARD_TIMEOUT_GRACE_SECONDS. The threads pool cannot kill and ignores it.
    hard_timeout_seconds: int | None = None
    workflow_id: uuid.UUID | None = None  # its completion releases its dependents (§16)
    queue_name: str = ""  # known when accepted: a pause of its queue makes it write its start
    # False: an accepted delivery run before its start was written (apps/executor/runner.py);
    # its AttemptRunner writes the start later, or with the success.
    started: bool = True


class Ending(StrEnum):
    """How an attempt ended, as its worker saw it."""

    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    CANCELLED = "CANCELLED"  # stopped after a cancel request
    RELEASED = "RELEASED"  # the worker shut down; the job goes back, no retry used
    SNOOZED = "SNOOZED"  # the task asked to run again later; no retry used (§13a)


def attempt_start(
    *, job_id: uuid.UUID, event_id: uuid.UUID, worker_id: str, began: float | None = None
) -> ClaimedAttempt | None:
    """Claim the execution for this delivery (DISPATCHED → RUNNING) and open its attempt, in
    one statement shared with the deliveries that arrive at the same time (`_starts`);
    `worker_id` is "<host>:<pid>:<thread>", its executor process the part before the last
    colon. None for a stale or duplicate delivery: the fence alone decides — a delivery
    that already started finds its execution RUNNING or finished, or its token cleared.
    `began`: the time.monotonic() at which an attempt that ran before its start is written
    (the start delay) began: the start recorded is then, not when the statement runs."""
    started = _starts().submit((job_id, event_id, worker_id, began))
    return _claimed(job_id, event_id, started)


def attempts_start(
    deliveries: list[tuple[uuid.UUID, uuid.UUID]], *, worker_id: str
) -> list[ClaimedAttempt | None]:
    """`attempt_start` for the deliveries of one run-job record, in one statement: a
    ClaimedAttempt or None for each, in their order."""
    started = _start_batch([(job_id, event_id, worker_id, None) for job_id, event_id in deliveries])
    return [
        _claimed(job_id, event_id, one)
        for (job_id, event_id), one in zip(deliveries, started, strict=True)
    ]


def attempts_start_warm_up(*, worker_id: str) -> None:
    """The start statement of an idle executor's deliveries, for a delivery no job has (the
    fence refuses it: nothing changes): run on each Celery thread's new connection before the
    executor registers (apps/executor/tasks.py, jobweaver.core.db.warm_connection)."""
    nothing = uuid.UUID(int=0)
    executions.executions_start(
        [(nothing, nothing, worker_id)], serves=list(settings.JOBWEAVER_EXECUTOR_QUEUES)
    )


def _claimed(job_id: uuid.UUID, event_id: uuid.UUID, started) -> ClaimedAttempt | None:
    if started is None:
        serves = list(settings.JOBWEAVER_EXECUTOR_QUEUES)
        if executions.execution_hand_back(job_id=job_id, event_id=event_id, serves=serves):
            logger.info(
                "delivery %s of job %s handed back: its queue is not one of %s",
                event_id,
                job_id,
                serves,
            )
            dispatch_job_now(job_id)  # to an executor that serves it
            return None
        logger.info(
            "delivery %s of job %s is stale or a duplicate (fenced); ignoring it", event_id, job_id
        )
        return None
    return _attempt(job_id, event_id, started, started=True)


def _attempt(
    job_id: uuid.UUID,
    event_id: uuid.UUID,
    fields: executions.Started | executions.Accepted,
    *,
    started: bool,
    queue_name: str = "",
) -> ClaimedAttempt:
    return ClaimedAttempt(
        job_id=job_id,
        event_id=event_id,
        attempt=fields.attempt,
        trace_id=fields.trace_id,
        kind=fields.job_type,
        instruction=fields.instruction,
        timeout_seconds=fields.timeout_seconds,
        traceparent=fields.traceparent,
        hard_timeout_seconds=fields.hard_timeout_seconds,
        workflow_id=fields.workflow_id,
        started=started,
        queue_name=queue_name,
    )


def deliveries_accept(
    deliveries: list[tuple[uuid.UUID, uuid.UUID]], *, executor_id: str
) -> dict[tuple[uuid.UUID, uuid.UUID], executions.Accepted]:
    """Take deliveries into this executor's line (engine.executions_accept): no other executor
    starts them now. The ones refused are left out; their turn starts them as usual, and the
    start's fence decides."""
    return executions.executions_accept(
        deliveries, executor_id=executor_id, serves=list(settings.JOBWEAVER_EXECUTOR_QUEUES)
    )


def unstarted_attempt(
    job_id: uuid.UUID, event_id: uuid.UUID, accepted: executions.Accepted
) -> ClaimedAttempt:
    """An accepted delivery as an attempt that runs before its start is written."""
    return _attempt(job_id, event_id, accepted, started=False, queue_name=accepted.queue_name)


def deliveries_give_back(event_ids: list[uuid.UUID]) -> int:
    """Deliveries this executor received but will not start (it is shutting down): back in
    line at once for another executor, no attempt, no retry used (a stale one changes
    nothing)."""
    if not event_ids:
        return 0
    with transaction.atomic():
        return executions.executions_give_back(event_ids)


def deliveries_recall_paused(event_ids: list[uuid.UUID], *, executor_id: str) -> int:
    """Accepted deliveries this executor will not run: their queue or job type was paused
    while they waited in its line. Back to PENDING, in their place, no attempt, nothing
    counted, as the pause takes back deliveries no executor accepted (a stale one changes
    nothing)."""
    if not event_ids:
        return 0
    with transaction.atomic():
        return executions.executions_recall_accepted(event_ids, executor_id=executor_id)


def attempt_finish(
    *,
    claimed: ClaimedAttempt,
    outcome: Ending | str,
    error: str = "",
    retryable: bool = True,
    steps_completed: int,
    log_lines: list[str],
    total_steps: int | None = None,
    result: Any = None,
    exception_type: str = "",
    traceback: str = "",
    exception_mro: tuple[str, ...] = (),
    snooze_seconds: float = 0.0,
) -> bool:
    """Record how the attempt ended together with the lifecycle's decision, atomically.
    Returns False when the fence refused it (the attempt was rescued or cancelled meanwhile, or
    a release met a cancel request): nothing changes — a task's late `result` included.
    `result`, `exception_type`, `traceback` and `exception_mro` are a TASK attempt's return value
    or exception (its class paths decide a task's retry_on).

    A success, the ending of nearly every attempt, is one statement, shared with the other
    successes of this process that end at the same time (`_completions`); the other endings
    are a transaction, as their decisions (retry or dead letter, a cancel
    request, a release) read the locked row first."""
    ending = Ending(outcome)
    report = AttemptReport(
        steps_completed=steps_completed,
        log_lines=log_lines,
        total_steps=total_steps,
        result=result,
        exception_type=exception_type,
        traceback=traceback,
    )
    if ending is Ending.SUCCESS:
        if claimed.workflow_id is None:
            accepted = _completions().submit((claimed.job_id, claimed.event_id, report))
        else:  # a workflow's job settles its workflow in its own statement (§16)
            accepted = executions.execution_complete(
                job_id=claimed.job_id,
                event_id=claimed.event_id,
                report=report,
                workflow_id=claimed.workflow_id,
            )
        if not accepted:
            log_refused(claimed, ending)
        return accepted
    return _attempt_end_otherwise(
        claimed, ending, report, error, retryable, exception_mro, snooze_seconds
    )


def start_and_complete_batch(completions: list) -> list[bool]:
    """One statement for successes whose start was not written, each (job id, event id, worker
    id, seconds run, report): the slots' write-behind's (apps/executor/runner.py). One bool
    per item: False where the fence refused it."""
    metrics.WRITE_BATCH.labels("start_and_complete").observe(len(completions))
    completed = executions.executions_start_and_complete(completions)
    return [job_id in completed for job_id, *_ in completions]


def complete_batch(completions: list) -> list[bool]:
    """One statement for successes, each (job id, event id, report) (engine.executions_complete):
    the group commit's and the slots' write-behind's, as `start_and_complete_batch`."""
    metrics.WRITE_BATCH.labels("complete").observe(len(completions))
    completed = executions.executions_complete(completions)
    return [job_id in completed for job_id, _, _ in completions]


def _start_batch(deliveries: list) -> list:
    """One statement for the deliveries that arrived together (engine.executions_start). A
    delivery given twice (a duplicate record, or a record and its redelivery at once) goes
    into the statement once, and only its first holder runs it."""
    unique = {(job_id, event_id): (worker, began) for job_id, event_id, worker, began in deliveries}
    metrics.WRITE_BATCH.labels("start").observe(len(unique))
    now = time.monotonic()  # a delivery may have waited for an earlier batch's statement
    started = executions.executions_start(
        [(job_id, event_id, worker) for (job_id, event_id), (worker, _) in unique.items()],
        serves=list(settings.JOBWEAVER_EXECUTOR_QUEUES),
        ran={one: now - began for one, (_, began) in unique.items() if began is not None},
    )
    return [started.pop((job_id, event_id), None) for job_id, event_id, _, _ in deliveries]


_writer: GroupCommit | None = None
_start_writer: GroupCommit | None = None
_writer_lock = threading.Lock()


def _completions() -> GroupCommit:
    """This process's writer of successes: the attempts' threads that end at about the same
    time share one statement (apps/core/groupcommit.py); an attempt ending alone is written at
    once. Each thread returns, and its delivery is acknowledged, after its batch committed."""
    global _writer
    with _writer_lock:
        if _writer is None:
            _writer = GroupCommit(complete_batch, max_batch=settings.JOBWEAVER_EXECUTOR_WRITE_BATCH)
        return _writer


def _starts() -> GroupCommit:
    """This process's writer of claims: deliveries that arrive while the previous claim
    statement runs share the next one, as successes do (`_completions`)."""
    global _start_writer
    with _writer_lock:
        if _start_writer is None:
            _start_writer = GroupCommit(
                _start_batch, max_batch=settings.JOBWEAVER_EXECUTOR_WRITE_BATCH
            )
        return _start_writer


@transaction.atomic
def _attempt_end_otherwise(
    claimed: ClaimedAttempt,
    ending: Ending,
    report: AttemptReport,
    error: str,
    retryable: bool,
    exception_mro: tuple[str, ...],
    snooze_seconds: float,
) -> bool:
    ids = {"job_id": claimed.job_id, "event_id": claimed.event_id, "report": report}
    if ending is Ending.SNOOZED:
        return executions.execution_snooze(**ids, seconds=snooze_seconds)
    if ending is Ending.FAILURE:
        decision = executions.execution_fail(
            **ids, error=error, retryable=retryable, exception_mro=exception_mro
        )
        accepted = decision is not None
        if not accepted:
            log_refused(claimed, ending)
        return accepted
    if ending is Ending.CANCELLED:
        return executions.execution_end_cancelled(**ids)
    accepted = executions.execution_release(**ids)
    if accepted:  # due again at once: send it to another worker right after commit
        transaction.on_commit(lambda: dispatch_job_now(claimed.job_id))
    return accepted


def log_refused(claimed: ClaimedAttempt, ending: Ending) -> None:
    logger.warning(
        "late outcome %s of job %s attempt %d rejected by the fence (event %s)",
        ending,
        claimed.job_id,
        claimed.attempt,
        claimed.event_id,
    )
