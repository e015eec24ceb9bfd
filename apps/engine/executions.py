"""The named transitions of a job's execution (ARCHITECTURE §4), one function each.

    created                        executions_create                        (submission)
    dispatch, set_aside, put_back  apps/engine/claim/                        (the dispatcher)
    start                          executions_start                         (fenced per row, one)
    heartbeat, complete            execution_heartbeat, _complete           (fenced, one statement)
    complete (many)                executions_complete                      (fenced per row, one)
    hand_back                      execution_hand_back                      (worker, wrong queue)
    retry | dead_letter            execution_fail                           (worker)
    end_cancelled, release         execution_end_cancelled, _release        (worker)
    snooze | dead_letter | ...     execution_snooze                         (worker, Snooze)
    retry | dead_letter | ...      execution_lose                           (rescuer, lost lease)
    redeliver                      execution_redeliver, executions_unsend   (rescuer, dispatcher)
    hold                           executions_hold                          (worker, waiting)
    accept                         executions_accept                        (worker, its line)
    start + complete               executions_start_and_complete            (fenced per row, one)
    recall                         executions_recall                        (operator's pause)
    recall_accepted                executions_recall_accepted               (worker, paused)
    operator_retry, cancel,        execution_retry, execution_cancel,       (operator)
    request_cancel, run_now        execution_run_now

Every write goes through the mover (apps/engine/mover.py), which takes the bookkeeping from the
transition table. Locking rules: every function runs inside its caller's transaction (it asserts
so) except the fenced worker transitions, each one atomic statement. Rows are locked by job id
with SELECT … FOR UPDATE and the fencing token is checked after the lock: a delivery can arrive
while the dispatcher that sent it still holds the row, and locking by id waits for that commit
and then reads the committed token. Times that decide something (leases, due times, start and
finish times) come from the database clock (`db_now`, read with the lock), never from this
process's.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import NamedTuple

from jobweaver.conf import settings
from jobweaver.core import metrics
from jobweaver.core.db import assert_in_transaction, seconds
from jobweaver.core.errors import InvalidStateTransition, JobNotFound
from jobweaver.engine import claim, events, ledger, workflows
from jobweaver.engine.ledger import NOTHING_REPORTED, AttemptReport
from jobweaver.engine.mover import (
    events_written,
    move_fenced,
    move_fenced_many,
    move_fenced_many_through,
    move_row,
    move_set,
)
from jobweaver.engine.retry import RetryDecision, policy_for, policy_from_settings, retries_on
from jobweaver.engine.store import events as event_rows
from jobweaver.engine.store import executions as execution_rows
from jobweaver.engine.transitions import IN_FLIGHT, TRANSITIONS, Actor, allows
from jobweaver.executor.models import AttemptOutcome
from jobweaver.scheduler.models import ExecutionStatus, JobExecution

logger = logging.getLogger(__name__)

WORKER, RESCUER, OPERATOR = Actor.WORKER, Actor.RESCUER, Actor.OPERATOR


# --- submission ---------------------------------------------------------------------------------


def executions_create(*, jobs: list, waiting: list[uuid.UUID] = ()) -> list[JobExecution]:
    """The PENDING executions of newly inserted jobs, in their order, each due at its `run_at`
    or at once (database clock), and their JobCreated events: inside the submit transaction.
    The jobs in `waiting` (a workflow's jobs with dependencies, §16) are WAITING instead.
    Each execution's concurrency key is its job's scoped to the owner, or shared under a
    global limit (claim.execution_keys)."""
    assert_in_transaction("executions_create")
    executions = execution_rows.executions_insert(jobs, claim.execution_keys(jobs), waiting)
    event_rows.events_insert_many(
        topic=events.JOB_CREATED.topic,
        rows=[
            (
                str(job.id),
                events.JOB_CREATED.payload(
                    job_id=job.id,
                    trace_id=job.trace_id,
                    job_type=job.job_type,
                    priority=job.priority,
                    max_retries=job.max_retries,
                    run_at=job.run_at,
                    created_at=job.created_at,
                ),
                job.trace_id,
            )
            for job in jobs
        ],
    )
    events_written()
    return executions


# --- the worker that holds the fencing token ------------------------------------------------------


class Started(NamedTuple):
    """What the executor needs of an execution it has just started (`executions_start`)."""

    attempt: int
    job_type: str
    instruction: dict
    trace_id: str
    traceparent: str
    timeout_seconds: int
    hard_timeout_seconds: int | None  # None: timeout_seconds + the grace (§13a)
    workflow_id: uuid.UUID | None  # the job's workflow (§16), or None


def executions_start(
    deliveries: list[tuple[uuid.UUID, uuid.UUID, str]],
    *,
    serves: list[str],
    ran: dict[tuple[uuid.UUID, uuid.UUID], float] | None = None,
) -> dict[tuple[uuid.UUID, uuid.UUID], Started]:
    """DISPATCHED → RUNNING for the holders of these deliveries' tokens — (job id, event id,
    worker id) each, the worker "<host>:<pid>:<thread>" of one executor process — starting
    each attempt's lease and opening its attempt row, in one statement, each row fenced by its
    own token: {(job id, event id): Started} for the ones started. A stale token, or a job
    whose queue the executor does not serve (`serves`; see `execution_hand_back`), changes
    nothing; a delivery given twice starts once. `ran`: the seconds an attempt already ran
    before its start is written (the start delay), by delivery: its start is recorded then."""
    executor_id = deliveries[0][2].rpartition(":")[0]
    assert all(w.rpartition(":")[0] == executor_id for _, _, w in deliveries), "one process"
    rows = move_fenced_many(
        "start",
        actor=WORKER,
        statement=lambda transition: list(
            execution_rows.executions_start(
                transition,
                deliveries=deliveries,
                executor_id=executor_id,
                lease=seconds(settings.JOBWEAVER_LEASE_SECONDS),
                serves=serves,
                ran=ran,
            ).items()
        ),
    )
    started = {}
    for delivery, (*fields, waited) in rows:
        metrics.count_on_commit(lambda waited=waited: metrics.START_WAIT.observe(float(waited)))
        started[delivery] = Started(*fields)
    return started


def execution_hand_back(*, job_id: uuid.UUID, event_id: uuid.UUID, serves: list[str]) -> bool:
    """DISPATCHED → PENDING, due at once, for a delivery whose job's queue is not among
    `serves` (a rebalance gave its partition to an executor of another pool); no attempt, no
    retry used, counted as a redelivery. False when the token is stale or the queue is served."""
    return move_fenced(
        "hand_back",
        actor=WORKER,
        statement=lambda transition: execution_rows.execution_hand_back(
            transition, job_id=job_id, event_id=event_id, serves=serves
        ),
    )


def execution_heartbeat(*, job_id: uuid.UUID, event_id: uuid.UUID) -> bool:
    """Extend the lease of a RUNNING attempt; False tells the worker its token is stale or the
    job was asked to cancel, so it must stop."""
    return move_fenced(
        "heartbeat",
        actor=WORKER,
        statement=lambda transition: execution_rows.execution_heartbeat(
            transition,
            job_id=job_id,
            event_id=event_id,
            lease=seconds(settings.JOBWEAVER_LEASE_SECONDS),
        ),
    )


def execution_should_stop(*, job_id: uuid.UUID, event_id: uuid.UUID) -> bool:
    """True when the attempt holding `event_id` should stop: cancellation was requested or the
    token is no longer current (a cheap indexed read, polled by running attempts)."""
    return not execution_rows.execution_may_go_on(job_id=job_id, event_id=event_id)


def execution_complete(
    *,
    job_id: uuid.UUID,
    event_id: uuid.UUID,
    report: AttemptReport = NOTHING_REPORTED,
    workflow_id: uuid.UUID | None = None,
) -> bool:
    """RUNNING → COMPLETED for the holder of `event_id`, its attempt closed SUCCESS with
    `report`, and its JobCompleted event, in one statement; False when the token is stale.
    A job of workflow `workflow_id` releases its dependents and counts itself on its workflow
    in the same statement (§16): the hot path stays one round trip."""
    fields = report.fields(outcome=AttemptOutcome.SUCCESS, error="")
    if workflow_id is None:
        store = execution_rows.execution_complete
    else:
        store = execution_rows.execution_complete_in_workflow
    moved = move_fenced(
        "complete",
        actor=WORKER,
        statement=lambda transition: store(
            transition, job_id=job_id, event_id=event_id, attempt_fields=fields
        ),
    )
    if not moved:  # False, or None from the workflow's statement: the fence refused it
        return False
    ledger.count_attempt(AttemptOutcome.SUCCESS)
    if workflow_id is not None:
        released, finished = moved
        workflows.count_settled(released=released, finished=finished)
    return True


def executions_complete(completions: list[tuple[uuid.UUID, uuid.UUID, AttemptReport]]) -> set:
    """`execution_complete` for many (job id, event id, report) at once, one statement: the
    executor's batched writer. Each row is fenced by its own token; returns the job ids
    completed (a refused one changes nothing). Not for a workflow's job (§16)."""
    rows = [
        {
            "job_id": job_id,
            "event_id": event_id,
            "steps_completed": report.steps_completed,
            "total_steps": report.total_steps,
            "log_lines": None if report.log_lines is None else list(report.log_lines),
            "result": report.result,
        }
        for job_id, event_id, report in completions
    ]
    completed = move_fenced_many(
        "complete",
        actor=WORKER,
        statement=lambda transition: execution_rows.executions_complete(
            transition, completions=rows
        ),
    )
    for _ in completed:
        ledger.count_attempt(AttemptOutcome.SUCCESS)
    return set(completed)


def execution_fail(
    *,
    job_id: uuid.UUID,
    event_id: uuid.UUID,
    error: str,
    retryable: bool,
    report: AttemptReport = NOTHING_REPORTED,
    exception_mro: tuple[str, ...] = (),
) -> RetryDecision | None:
    """A failed attempt of the holder of `event_id`, recorded FAILURE: → PENDING with backoff,
    → FAILED (dead letter), or → CANCELLED when a cancel was requested. None when the token
    is stale (nothing changes). `exception_mro`: the class paths of a task's exception, which
    its `retry_on` is matched against (retry.retries_on)."""
    execution = _lock(job_id, event_id=event_id)
    if execution is None or not allows(execution.status, "retry"):
        return None
    ledger.attempt_close(
        event_id=event_id, outcome=AttemptOutcome.FAILURE, error=error, report=report
    )
    job = execution.job
    retryable = retryable and retries_on(job.retry_on, exception_mro)
    return _fail(execution, actor=WORKER, error=error, retryable=retryable)


def execution_snooze(
    *,
    job_id: uuid.UUID,
    event_id: uuid.UUID,
    seconds: float,
    report: AttemptReport = NOTHING_REPORTED,
) -> bool:
    """RUNNING → PENDING due in `seconds` for the holder of `event_id` whose task snoozed, its
    attempt closed SNOOZED, no retry used. Past JOBWEAVER_MAX_SNOOZES snoozes the job
    dead-letters instead; a cancel requested meanwhile ends it CANCELLED. False when the token
    is stale (nothing changes)."""
    execution = _lock(job_id, event_id=event_id)
    if execution is None or not allows(execution.status, "snooze"):
        return False
    if execution.cancel_requested:
        ledger.attempt_close(
            event_id=event_id, outcome=AttemptOutcome.CANCELLED, error="cancelled", report=report
        )
        _end_cancelled(execution, actor=WORKER)
        return True
    limit = settings.JOBWEAVER_MAX_SNOOZES
    if execution.snooze_count >= limit:
        error = f"snoozed {execution.snooze_count} times, the most JOBWEAVER_MAX_SNOOZES allows"
        ledger.attempt_close(
            event_id=event_id, outcome=AttemptOutcome.FAILURE, error=error, report=report
        )
        _fail(execution, actor=WORKER, error=error, retryable=False)
        return True
    ledger.attempt_close(event_id=event_id, outcome=AttemptOutcome.SNOOZED, error="", report=report)
    move_row(
        execution,
        "snooze",
        actor=WORKER,
        changes={
            "snooze_count": execution.snooze_count + 1,
            "next_run_at": execution.db_now + timedelta(seconds=seconds),
            "current_event_id": None,
            "lease_expires_at": None,
        },
    )
    return True


def execution_end_cancelled(
    *, job_id: uuid.UUID, event_id: uuid.UUID, report: AttemptReport = NOTHING_REPORTED
) -> bool:
    """RUNNING (cancel requested) → CANCELLED for the holder of `event_id`, its attempt closed
    CANCELLED; False when the token is stale or no cancel was requested."""
    execution = _lock(job_id, event_id=event_id)
    if execution is None or not allows(execution.status, "end_cancelled"):
        return False
    if not execution.cancel_requested:
        return False
    ledger.attempt_close(
        event_id=event_id, outcome=AttemptOutcome.CANCELLED, error="cancelled", report=report
    )
    _end_cancelled(execution, actor=WORKER)
    return True


RELEASED_MESSAGE = (
    "released: the worker shut down before the attempt finished (not counted as a retry)"
)


def execution_release(
    *, job_id: uuid.UUID, event_id: uuid.UUID, report: AttemptReport = NOTHING_REPORTED
) -> bool:
    """RUNNING → PENDING for the holder of `event_id` whose worker is shutting down: due at
    once, retry count unchanged (the job did not fail), its attempt recorded LOST. False when
    the token is stale or a cancel was requested (the caller records the cancellation)."""
    execution = _lock(job_id, event_id=event_id)
    if execution is None or not allows(execution.status, "release") or execution.cancel_requested:
        return False
    ledger.attempt_close(
        event_id=event_id, outcome=AttemptOutcome.LOST, error=RELEASED_MESSAGE, report=report
    )
    move_row(
        execution,
        "release",
        actor=WORKER,
        changes={
            "next_run_at": execution.db_now,
            "current_event_id": None,
            "lease_expires_at": None,
        },
    )
    return True


def executions_hold(event_ids: list[uuid.UUID], *, executor_id: str) -> int:
    """Renew the dispatch lease of deliveries the executor `executor_id` has received and will
    start when a slot frees, so waiting behind long jobs is never taken for a loss (the ones it
    accepted: the attempt's lease, JOBWEAVER_LEASE_SECONDS; one another executor accepted is
    left to that one)."""
    if not event_ids:
        return 0
    return move_set(
        "hold",
        actor=WORKER,
        statement=lambda transition: execution_rows.executions_hold(
            transition,
            event_ids=event_ids,
            executor_id=executor_id,
            lease=seconds(settings.JOBWEAVER_DISPATCH_TIMEOUT_SECONDS),
            accepted_lease=seconds(settings.JOBWEAVER_LEASE_SECONDS),
        ),
    )


class Accepted(NamedTuple):
    """What the executor needs of a delivery it accepted (`executions_accept`): what a start
    would tell it, and how often the job was sent again without an attempt."""

    attempt: int  # the attempt it will be, once started
    job_type: str
    instruction: dict
    trace_id: str
    traceparent: str
    timeout_seconds: int
    hard_timeout_seconds: int | None
    workflow_id: uuid.UUID | None
    redelivery_count: int
    queue_name: str  # a pause of its queue or job type makes its executor give it back


def executions_accept(
    deliveries: list[tuple[uuid.UUID, uuid.UUID]], *, executor_id: str, serves: list[str]
) -> dict[tuple[uuid.UUID, uuid.UUID], Accepted]:
    """The executor `executor_id` takes these DISPATCHED deliveries (job id, event id) into its
    line, in one statement, each row fenced by its own token: from now on no other executor
    starts them (a duplicate record after a rebalance is refused), and their lease is the
    attempt's (JOBWEAVER_LEASE_SECONDS, renewed by `executions_hold`), so the rescue sends them
    again soon after this executor died. {(job id, event id): Accepted} for the ones accepted;
    a stale token, an unserved queue or a delivery another executor accepted changes
    nothing."""
    rows = move_fenced_many(
        "accept",
        actor=WORKER,
        statement=lambda transition: list(
            execution_rows.executions_accept(
                transition,
                deliveries=deliveries,
                executor_id=executor_id,
                lease=seconds(settings.JOBWEAVER_LEASE_SECONDS),
                serves=serves,
            ).items()
        ),
    )
    return {delivery: Accepted(*fields) for delivery, fields in rows}


def executions_start_and_complete(
    completions: list[tuple[uuid.UUID, uuid.UUID, str, float, AttemptReport]],
) -> set:
    """Start and complete, in one statement, deliveries an executor accepted and ran before
    their start was written — (job id, event id, worker id, seconds it ran, report) each, the
    workers of one executor process — each row fenced by its own token: DISPATCHED → RUNNING
    → COMPLETED (both transitions counted), the attempt recorded SUCCESS whole, the
    JobCompleted event. Returns the job ids completed; a refused row changes nothing (the job
    was cancelled, or the rescue took it). Not for a workflow's job (§16)."""
    executor_id = completions[0][2].rpartition(":")[0]
    assert all(c[2].rpartition(":")[0] == executor_id for c in completions), "one process"
    rows = [
        {
            "job_id": job_id,
            "event_id": event_id,
            "worker_id": worker_id,
            "ran": ran,
            "steps_completed": report.steps_completed,
            "total_steps": report.total_steps,
            "log_lines": None if report.log_lines is None else list(report.log_lines),
            "result": report.result,
        }
        for job_id, event_id, worker_id, ran, report in completions
    ]
    completed = move_fenced_many_through(
        ("start", "complete"),
        actor=WORKER,
        statement=lambda start, complete: execution_rows.executions_start_and_complete(
            start, complete, completions=rows, executor_id=executor_id
        ),
    )
    for _, waited in completed:
        metrics.count_on_commit(lambda waited=waited: metrics.START_WAIT.observe(waited))
        ledger.count_attempt(AttemptOutcome.SUCCESS)
    return {job_id for job_id, _ in completed}


# --- decisions on a locked row ------------------------------------------------------------------


def _lock(job_id: uuid.UUID, *, event_id: uuid.UUID | None = None) -> JobExecution | None:
    """The job's execution under a row lock, annotated with the database's `db_now`; None if
    there is none or, when `event_id` is given, when that is not the current fencing token."""
    assert_in_transaction("locking an execution")
    execution = execution_rows.execution_lock(job_id)
    if execution is None:
        return None
    if event_id is not None and execution.current_event_id != event_id:
        return None
    return execution


def _fail(execution: JobExecution, *, actor: Actor, error: str, retryable: bool) -> RetryDecision:
    """The failure decision for a locked, live execution (worker failure or lost lease); its
    events commit with it. A job whose cancellation was requested ends CANCELLED instead: it
    is never retried automatically."""
    now = execution.db_now
    if execution.cancel_requested:
        _end_cancelled(execution, actor=actor, reason=f"cancelled ({error})")
        return RetryDecision(retry=False, retry_count=execution.retry_count, reason="cancelled")
    job = execution.job
    policy = policy_for(
        job.retry_backoff,
        job.retry_jitter,
        defaults=policy_from_settings(),
        scale=settings.JOBWEAVER_BACKOFF_SCALE,
    )
    decision = policy.decide(
        retry_count=execution.retry_count,
        max_retries=execution.max_retries,
        retryable=retryable,
        now=now,
    )
    failed = (
        events.JOB_FAILED,
        {
            "job_id": execution.job_id,
            "event_id": execution.current_event_id,
            "trace_id": execution.job.trace_id,
            "attempt": execution.attempt_count,
            "error": error,
            "retryable": retryable,
            "will_retry": decision.retry,
            "failed_at": now,
            "next_run_at": decision.next_run_at if decision.retry else None,
        },
    )
    changes = {
        "last_error": error,
        "retry_count": decision.retry_count,
        "lease_expires_at": None,
        "current_event_id": None,
    }
    if decision.retry:
        move_row(
            execution,
            "retry",
            actor=actor,
            changes={**changes, "next_run_at": decision.next_run_at},
            events=dict([failed]),
        )
        return decision
    dead_letter = (
        events.JOB_DEAD_LETTER,
        {
            "job_id": execution.job_id,
            "trace_id": execution.job.trace_id,
            "reason": f"{decision.reason}: {error}",
            "final_retry_count": decision.retry_count,
            "attempts": execution.attempt_count,
            "failed_at": now,
        },
    )
    move_row(
        execution,
        "dead_letter",
        actor=actor,
        changes={**changes, "finished_at": now},
        events=dict([failed, dead_letter]),
    )
    _settled(execution, actor=actor)
    logger.warning(
        "job %s dead-lettered after %d attempt(s): %s",
        execution.job_id,
        execution.attempt_count,
        error,
    )
    return decision


def _end_cancelled(execution: JobExecution, *, actor: Actor, reason: str = "cancelled") -> None:
    # Clearing the token fences off whoever still holds it.
    move_row(
        execution,
        "end_cancelled",
        actor=actor,
        changes={
            "current_event_id": None,
            "lease_expires_at": None,
            "finished_at": execution.db_now,
            "last_error": reason,
        },
    )
    _settled(execution, actor=actor)


def _settled(execution: JobExecution, *, actor: Actor) -> None:
    """A job that just finished (FAILED or CANCELLED; a completion settles in
    execution_complete): its dependents and its workflow follow, if it has one (§16)."""
    workflow_id = workflows.workflow_of(execution.job_id)
    if workflow_id is not None:
        workflows.jobs_settled(workflow_id, {execution.job_id: execution.status}, actor=actor)


# --- the rescuer: leases that expired ------------------------------------------------------------


def executions_lock_expired(
    *, limit: int, expired_by: datetime | None = None, job_ids: list[uuid.UUID] | None = None
) -> list[JobExecution]:
    """Up to `limit` DISPATCHED or RUNNING executions whose lease expired, locked with FOR
    UPDATE SKIP LOCKED: a row locked right now (its worker is recording an outcome) is skipped
    and looked at again next time. `expired_by` replaces the database clock (tests)."""
    assert_in_transaction("executions_lock_expired")
    return execution_rows.executions_lock_expired(
        sources=IN_FLIGHT, limit=limit, expired_by=expired_by, job_ids=job_ids
    )


def execution_lose(execution: JobExecution, *, error: str) -> RetryDecision:
    """The RUNNING attempt of a locked execution was lost (its lease expired): the attempt is
    recorded LOST and the failure decision made, as for a failed attempt."""
    ledger.attempt_close(
        event_id=execution.current_event_id, outcome=AttemptOutcome.LOST, error=error
    )
    return _fail(execution, actor=RESCUER, error=error, retryable=True)


def execution_redeliver(execution: JobExecution) -> JobExecution:
    """DISPATCHED → PENDING for a locked execution whose dispatch lease expired: due at once,
    token cleared (a late message is fenced off), no attempt, no retry used; counted."""
    return move_row(
        execution,
        "redeliver",
        actor=RESCUER,
        changes={
            "next_run_at": execution.db_now,
            "current_event_id": None,
            "lease_expires_at": None,
            "worker_id": "",
            "redelivery_count": execution.redelivery_count + 1,
        },
    )


def executions_give_back(event_ids: list[uuid.UUID]) -> int:
    """An executor shutting down gives back deliveries it received and did not start: DISPATCHED
    → PENDING at once (transition "redeliver"), fenced by their tokens. Returns how many moved."""
    assert_in_transaction("executions_give_back")
    return move_set(
        "redeliver",
        actor=WORKER,
        statement=lambda transition: execution_rows.executions_unsend(
            transition, event_ids=event_ids
        ),
    )


def executions_unsend(event_ids: list[uuid.UUID]) -> int:
    """The publish of these deliveries failed after their claim committed: DISPATCHED →
    PENDING at once (transition "redeliver"), fenced by their tokens, so a message that did
    reach Kafka after all is ignored. Returns how many moved."""
    assert_in_transaction("executions_unsend")
    return move_set(
        "redeliver",
        actor=Actor.DISPATCHER,
        statement=lambda transition: execution_rows.executions_unsend(
            transition, event_ids=event_ids
        ),
    )


# --- operator actions -------------------------------------------------------------------------


def executions_recall(*, queue_names: list[str] = (), job_types: list[str] = ()) -> int:
    """Transition "recall" for every DISPATCHED execution of these queues or job types (a
    pause): back to PENDING before any worker starts it. A worker that already locked one to
    start it wins (it is RUNNING once this statement gets the row, and is left to finish)."""
    assert_in_transaction("executions_recall")
    return move_set(
        "recall",
        actor=OPERATOR,
        statement=lambda transition: execution_rows.executions_recall(
            transition, queue_names=list(queue_names), job_types=list(job_types)
        ),
    )


def executions_recall_accepted(event_ids: list[uuid.UUID], *, executor_id: str) -> int:
    """Transition "recall_accepted" for deliveries the executor `executor_id` accepted and will
    not run: their queue or job type was paused while they waited in its line. Back to PENDING
    as a pause's recall leaves them, fenced by their tokens (a stale one changes nothing).
    Returns how many moved."""
    assert_in_transaction("executions_recall_accepted")
    return move_set(
        "recall_accepted",
        actor=WORKER,
        statement=lambda transition: execution_rows.executions_recall_accepted(
            transition, event_ids=list(event_ids), executor_id=executor_id
        ),
    )


def executions_accepted_count(*, queue_names: list[str] = (), job_types: list[str] = ()) -> int:
    """How many DISPATCHED executions of these queues or job types an executor accepted (and
    neither started, ended nor gave back yet): what a pause waits for (a read)."""
    return execution_rows.executions_accepted_count(
        queue_names=list(queue_names), job_types=list(job_types)
    )


def _lock_or_404(job_id: uuid.UUID) -> JobExecution:
    execution = _lock(job_id)
    if execution is None:
        raise JobNotFound(f"Job {job_id} not found", job_id=job_id)
    return execution


def execution_retry(*, job_id: uuid.UUID) -> JobExecution:
    """FAILED | CANCELLED → PENDING with a fresh retry budget; the attempt history stays. A
    workflow's job brings back the jobs its failure cancelled, and reopens its workflow
    (§16); one cancelled while it waited goes back to WAITING."""
    execution = _lock_or_404(job_id)
    if not allows(execution.status, "operator_retry"):
        raise InvalidStateTransition(
            f"Job {job_id} is {execution.status}; only FAILED or CANCELLED jobs can be retried",
            job_id=job_id,
        )
    was = execution.status
    workflow_id = workflows.workflow_of(job_id)
    # A workflow's job cancelled while it waited for its dependencies waits for them again.
    waits = workflow_id is not None and workflows.waits_again(job_id)
    moved = move_row(
        execution,
        "reopen" if waits else "operator_retry",
        actor=OPERATOR,
        changes={
            "retry_count": 0,
            "next_run_at": execution.db_now,
            "current_event_id": None,
            "lease_expires_at": None,
            "cancel_requested": False,
            "finished_at": None,
            **({"last_error": ""} if waits else {}),
        },
    )
    reopened = (
        workflows.job_reopened(workflow_id, job_id, was=was) if workflow_id is not None else []
    )
    if moved.concurrency_key is not None or reopened:
        # Their keys have the form of when they finished; the limits may have changed since
        # (a global limit set or removed): they wait with today's (claim.executions_rekey).
        rekeyed = claim.executions_rekey(job_ids=[job_id, *reopened])
        moved.concurrency_key = rekeyed.get(job_id, moved.concurrency_key)
    return moved


def execution_cancel(*, job_id: uuid.UUID) -> JobExecution:
    """WAITING | PENDING | DISPATCHED → CANCELLED at once (a message still in flight is fenced
    off; a workflow's dependents follow); RUNNING → cancel requested (the worker stops at its
    next checkpoint)."""
    execution = _lock_or_404(job_id)
    if allows(execution.status, "cancel"):
        move_row(
            execution,
            "cancel",
            actor=OPERATOR,
            changes={
                "current_event_id": None,
                "lease_expires_at": None,
                "finished_at": execution.db_now,
                "last_error": "cancelled",
            },
        )
        _settled(execution, actor=OPERATOR)
        return execution
    if allows(execution.status, "request_cancel"):
        return move_row(
            execution, "request_cancel", actor=OPERATOR, changes={"cancel_requested": True}
        )
    raise InvalidStateTransition(
        f"Job {job_id} is {execution.status}; it cannot be cancelled", job_id=job_id
    )


def execution_run_now(*, job_id: uuid.UUID) -> JobExecution:
    """A PENDING job waiting for its runAt or its backoff delay becomes due at once (database
    clock); a job that is already due, or not PENDING, is left alone."""
    execution = _lock_or_404(job_id)
    if not allows(execution.status, "run_now"):
        raise InvalidStateTransition(
            f"Job {job_id} is {execution.status}; only PENDING jobs can be run now", job_id=job_id
        )
    if execution.next_run_at <= execution.db_now:
        raise InvalidStateTransition(f"Job {job_id} is already due", job_id=job_id)
    return move_row(execution, "run_now", actor=OPERATOR, changes={"next_run_at": execution.db_now})


__all__ = [
    "RELEASED_MESSAGE",
    "TRANSITIONS",
    "ExecutionStatus",
    "Started",
    "execution_cancel",
    "execution_complete",
    "execution_end_cancelled",
    "execution_fail",
    "execution_heartbeat",
    "execution_lose",
    "execution_redeliver",
    "execution_release",
    "execution_retry",
    "execution_run_now",
    "execution_should_stop",
    "execution_snooze",
    "executions_accept",
    "executions_accepted_count",
    "executions_complete",
    "executions_create",
    "executions_hold",
    "executions_lock_expired",
    "executions_recall",
    "executions_recall_accepted",
    "executions_start",
    "executions_start_and_complete",
    "executions_unsend",
]
