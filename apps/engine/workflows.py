"""The engine's part of workflows (ARCHITECTURE §16): what a job's finish, retry or cancel does
to the jobs that depend on it and to its workflow, in the transaction of that job's move.

A job's node counts its dependencies not yet settled: not COMPLETED or, for a job that ignores
failed dependencies, not finished at all. When a job finishes:
- COMPLETED: each dependent's count goes down by one; a WAITING job at zero becomes PENDING.
- FAILED or CANCELLED: a dependent that ignores failed dependencies counts it as settled; any
  other WAITING dependent is CANCELLED ("dependency <ref> failed"), and that finish settles its
  own dependents in turn, down the graph.
Then the workflow counts its jobs that finished (and failed); the one transaction that brings
its unfinished count to zero finishes it, and writes WorkflowFinished.

Locks are taken in one order everywhere: the finishing job's execution (its mover locked it),
the dependents' nodes in job id order, the workflow's row last. A workflow cancel, which must
lock many executions, takes them all at once without waiting (NOWAIT) and its caller tries
again, so it never waits while holding some.
"""

from __future__ import annotations

import uuid
from collections import Counter

from jobweaver.core import metrics
from jobweaver.core.db import assert_in_transaction
from jobweaver.engine.mover import move_set, move_workflow
from jobweaver.engine.store import executions as execution_rows
from jobweaver.engine.store import workflows as workflow_rows
from jobweaver.engine.transitions import Actor
from jobweaver.scheduler.models import ExecutionStatus
from jobweaver.workflows.models import WorkflowStatus

S = ExecutionStatus


def count_settled(*, released: int, finished: str | None) -> None:
    """The bookkeeping of a completion that settled its workflow in its own statement
    (executions.execution_complete): the unblock transitions, the workflow's finish."""
    if released:
        counter = metrics.TRANSITIONS.labels("unblock")
        metrics.count_on_commit(lambda: counter.inc(released))
    if finished is not None:
        finish = metrics.WORKFLOW_TRANSITIONS.labels(f"finish:{finished}")
        metrics.count_on_commit(lambda: finish.inc())


def workflow_of(job_id: uuid.UUID) -> uuid.UUID | None:
    return workflow_rows.workflow_of(job_id)


def jobs_settled(workflow_id: uuid.UUID, settled: dict[uuid.UUID, str], *, actor: Actor) -> None:
    """Jobs of the workflow that reached a terminal status in this transaction (job id →
    COMPLETED, FAILED or CANCELLED): release, cancel or count their dependents, down the
    graph, then count the finished jobs on the workflow."""
    assert_in_transaction("jobs_settled")
    finished = len(settled)
    failed = sum(1 for status in settled.values() if status == S.FAILED)
    frontier = dict(settled)
    while frontier:
        decrements: Counter[uuid.UUID] = Counter()
        cancels: dict[uuid.UUID, uuid.UUID] = {}
        for dependent, parent, ignores, status in workflow_rows.dependents_lock(list(frontier)):
            if frontier[parent] == S.COMPLETED or ignores:
                decrements[dependent] += 1
            elif status == S.WAITING:
                cancels.setdefault(dependent, parent)
        counts = workflow_rows.nodes_count({job: -n for job, n in decrements.items()})
        ready = [job for job, count in counts.items() if count == 0 and job not in cancels]
        if ready:
            unblocked = move_set(
                "unblock",
                actor=actor,
                statement=lambda t, ready=ready: execution_rows.executions_unblock(
                    t, job_ids=ready
                ),
            )
            if unblocked:
                execution_rows.notify_dispatch()  # new work, due now
        frontier = {}
        if cancels:
            names = workflow_rows.refs(list(set(cancels.values())))
            reasons = {job: f"dependency {names[parent]} failed" for job, parent in cancels.items()}
            cancelled = move_set(
                "dependency_failed",
                actor=actor,
                statement=lambda t, reasons=reasons: execution_rows.executions_dependency_failed(
                    t, reasons=reasons
                ),
            )
            workflow_rows.nodes_cancelled_by({job: cancels[job] for job in cancelled})
            finished += len(cancelled)
            frontier = dict.fromkeys(cancelled, S.CANCELLED)
    _count(workflow_id, unfinished=-finished, failed=failed)


def job_reopened(
    workflow_id: uuid.UUID, job_id: uuid.UUID, *, was: str, actor: Actor = Actor.OPERATOR
) -> list[uuid.UUID]:
    """An operator's retry moved a finished job of the workflow back (to PENDING or WAITING):
    the jobs its failure cancelled wait again (down the graph), the dependents that had counted
    it as settled count it again, and the workflow runs again. Returns the jobs brought back
    with it."""
    assert_in_transaction("job_reopened")
    reopened = 1
    brought_back: list[uuid.UUID] = []
    frontier = [job_id]
    while frontier:
        # A failure or cancel had settled it for the dependents that ignore failed ones.
        ignoring = Counter(
            dependent
            for dependent, _, ignores, status in workflow_rows.dependents_lock(frontier)
            if ignores and status == S.WAITING
        )
        workflow_rows.nodes_count(dict(ignoring))
        back = workflow_rows.cancelled_because_of(frontier)
        if not back:
            break
        frontier = move_set(
            "reopen",
            actor=actor,
            statement=lambda t, back=back: execution_rows.executions_reopen(t, job_ids=back),
        )
        workflow_rows.nodes_cancelled_by(dict.fromkeys(frontier))
        reopened += len(frontier)
        brought_back += frontier
    _count(workflow_id, unfinished=reopened, failed=-1 if was == S.FAILED else 0, reopen=True)
    return brought_back


def waits_again(job_id: uuid.UUID) -> bool:
    """Whether a job being retried has dependencies not settled (it was cancelled while
    WAITING): it goes back to WAITING rather than PENDING."""
    return workflow_rows.node_waiting_on(job_id) > 0


def workflow_cancel(workflow_id: uuid.UUID) -> list[uuid.UUID]:
    """Cancel every unfinished job of the workflow: WAITING, PENDING and DISPATCHED ones at
    once, RUNNING ones by a cancel request (their workers stop them); the workflow finishes
    CANCELLED once the last has stopped. Raises the database's LockNotAvailable when one of
    its executions is locked right now (the caller tries again). Returns the jobs cancelled."""
    assert_in_transaction("workflow_cancel")
    unfinished = workflow_rows.unfinished_lock_nowait(workflow_id)
    workflow_rows.workflow_count(workflow_id, unfinished=0, failed=0, cancelled=True)
    running = [job for job, status in unfinished if status == S.RUNNING]
    waiting = [job for job, status in unfinished if status != S.RUNNING]
    if running:
        move_set(
            "request_cancel",
            actor=Actor.OPERATOR,
            statement=lambda t: execution_rows.executions_request_cancel_set(t, job_ids=running),
        )
    cancelled = []
    if waiting:
        cancelled = move_set(
            "cancel",
            actor=Actor.OPERATOR,
            statement=lambda t: execution_rows.executions_cancel_set(t, job_ids=waiting),
        )
    # Every unfinished job was cancelled or asked to stop: the settling finds no WAITING
    # dependent to cancel "because of a dependency", only counts.
    if cancelled:
        jobs_settled(workflow_id, dict.fromkeys(cancelled, S.CANCELLED), actor=Actor.OPERATOR)
    else:
        _count(workflow_id, unfinished=0, failed=0)
    return cancelled


def _count(workflow_id: uuid.UUID, *, unfinished: int, failed: int, reopen: bool = False) -> None:
    """Apply the deltas to the workflow's counts (its row lock serializes them), and finish or
    reopen it as the counts now say."""
    left, failures, cancelled, status, name, trace_id = workflow_rows.workflow_count(
        workflow_id,
        unfinished=unfinished,
        failed=failed,
        cancelled=False if reopen else None,
    )
    moves = {"name_of": name, "trace_id": trace_id}
    if reopen and status != WorkflowStatus.RUNNING:
        move_workflow(workflow_id, "reopen", current=status, target=WorkflowStatus.RUNNING, **moves)
    elif left == 0 and status == WorkflowStatus.RUNNING:
        if cancelled:
            target = WorkflowStatus.CANCELLED
        elif failures:
            target = WorkflowStatus.FAILED
        else:
            target = WorkflowStatus.COMPLETED
        move_workflow(workflow_id, "finish", current=status, target=target, **moves)
