"""The transition table of a job's execution (ARCHITECTURE §4): its one home.

Every way a JobExecution's status may change is a row here: from which states, to which, who
may trigger it, whether the trigger must hold the fencing token, which domain events it writes
and which counter it adds to besides `jobweaver_transitions`. The mover (apps/engine/mover.py)
reads this table for every write, so the bookkeeping of a transition cannot be forgotten by the
path that makes it. A unit test holds the table against §4.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from jobweaver.engine import events
from jobweaver.engine.events import Event
from jobweaver.scheduler.models import ExecutionStatus
from jobweaver.workflows.models import WorkflowStatus

S = ExecutionStatus


class Actor(StrEnum):
    DISPATCHER = "dispatcher"  # the scheduler's dispatch (beat tick, submit fast path)
    WORKER = "worker"  # an executor holding the delivery's fencing token
    RESCUER = "rescuer"  # the lease rescue, for a lease that expired
    OPERATOR = "operator"  # API, admin, CLI


@dataclass(frozen=True)
class Transition:
    name: str
    sources: frozenset[ExecutionStatus]
    target: ExecutionStatus
    actors: frozenset[Actor]
    # Fenced transitions are made for the holder of `current_event_id` only: a late or duplicate
    # message, or a worker whose lease was taken away, changes nothing.
    fenced: bool
    # The domain events written in the same transaction (apps/engine/events.py).
    events: tuple[Event, ...] = ()
    # A counter of jobweaver.core.metrics counted as well, by its name.
    also_counts: str | None = None

    @property
    def frees_a_credit(self) -> bool:
        """Leaving DISPATCHED or RUNNING frees an executor's credit: the dispatcher is woken."""
        return bool(self.sources & IN_FLIGHT) and self.target not in IN_FLIGHT


# Executions holding a credit of flow control (ARCHITECTURE §4a).
IN_FLIGHT = frozenset({S.DISPATCHED, S.RUNNING})

DISPATCHER, WORKER, RESCUER, OPERATOR = Actor


def _t(name, sources, target, *actors, fenced, events=(), also_counts=None) -> Transition:
    return Transition(
        name, frozenset(sources), target, frozenset(actors), fenced, events, also_counts
    )


# name -> (from-states, to-state, who, fenced, events). Submission creates the execution PENDING.
TRANSITIONS: dict[str, Transition] = {
    t.name: t
    for t in (
        _t("dispatch", {S.PENDING}, S.DISPATCHED, DISPATCHER, fenced=False),
        # The executor holding the delivery renews its dispatch lease while it waits for a slot.
        _t("hold", {S.DISPATCHED}, S.DISPATCHED, WORKER, fenced=True),
        # The executor takes a delivery it will run from its line: no other may start it now.
        _t("accept", {S.DISPATCHED}, S.DISPATCHED, WORKER, fenced=True),
        # The dispatch lease expired before any worker started the delivery (its executor
        # stopped, or the message was lost), the publish failed, or the executor holding it
        # shuts down before a slot freed: sent again with a fresh token, no attempt recorded,
        # no retry used.
        _t(
            "redeliver",
            {S.DISPATCHED},
            S.PENDING,
            RESCUER,
            DISPATCHER,
            WORKER,
            fenced=True,
            also_counts="JOBS_REDELIVERED",
        ),
        # A pause took back deliveries no worker had started: waiting again, in their place in
        # line, token cleared (the message still on Kafka is fenced off), nothing counted.
        _t("recall", {S.DISPATCHED}, S.PENDING, OPERATOR, fenced=False),
        # The pause leaves the deliveries an executor accepted (one may run already): that
        # executor gives back the ones still in its line, the same way, fenced by their tokens.
        _t("recall_accepted", {S.DISPATCHED}, S.PENDING, WORKER, fenced=True),
        _t("start", {S.DISPATCHED}, S.RUNNING, WORKER, fenced=True),
        # A delivery reached an executor that does not serve its queue (a rebalance moved the
        # partition): back in line at once for a serving one, no attempt, counted (§15).
        _t(
            "hand_back",
            {S.DISPATCHED},
            S.PENDING,
            WORKER,
            fenced=True,
            also_counts="JOBS_REDELIVERED",
        ),
        _t("heartbeat", {S.RUNNING}, S.RUNNING, WORKER, fenced=True),  # extends the lease only
        _t(
            "complete",
            {S.RUNNING},
            S.COMPLETED,
            WORKER,
            fenced=True,
            events=(events.JOB_COMPLETED,),
        ),
        # A failed attempt (or a lost one, found by the rescuer): retry with backoff, or
        # dead-letter.
        _t(
            "retry",
            {S.RUNNING},
            S.PENDING,
            WORKER,
            RESCUER,
            fenced=True,
            events=(events.JOB_FAILED,),
        ),
        _t(
            "dead_letter",
            {S.RUNNING},
            S.FAILED,
            WORKER,
            RESCUER,
            fenced=True,
            events=(events.JOB_FAILED, events.JOB_DEAD_LETTER),
            also_counts="JOBS_DEAD_LETTERED",
        ),
        # The attempt stopped after a cancel request (cooperatively, by failing, or lost).
        _t("end_cancelled", {S.RUNNING}, S.CANCELLED, WORKER, RESCUER, fenced=True),
        # The task asked to run again later (Snooze, §13a): due then, no retry used.
        _t("snooze", {S.RUNNING}, S.PENDING, WORKER, fenced=True),
        # The worker shuts down: the job is due again at once, no retry used.
        _t("release", {S.RUNNING}, S.PENDING, WORKER, fenced=True),
        _t("cancel", {S.WAITING, S.PENDING, S.DISPATCHED}, S.CANCELLED, OPERATOR, fenced=False),
        # The worker stops itself at its next checkpoint.
        _t("request_cancel", {S.RUNNING}, S.RUNNING, OPERATOR, fenced=False),
        _t("operator_retry", {S.FAILED, S.CANCELLED}, S.PENDING, OPERATOR, fenced=False),
        # Workflows (§16), in the transaction of the move that decides them: a job whose last
        # dependency settled becomes due; one whose dependency failed is cancelled (whoever
        # ended that dependency: its worker, the rescuer, an operator); an operator's retry of
        # a dependency brings back the jobs cancelled because of it, and a retried job whose
        # dependencies are not done waits for them again.
        _t("unblock", {S.WAITING}, S.PENDING, WORKER, RESCUER, OPERATOR, fenced=False),
        _t(
            "dependency_failed",
            {S.WAITING},
            S.CANCELLED,
            WORKER,
            RESCUER,
            OPERATOR,
            fenced=False,
        ),
        _t("reopen", {S.CANCELLED}, S.WAITING, OPERATOR, fenced=False),
        # An operator makes a delayed (runAt or backoff) job due now; the status stays PENDING.
        _t("run_now", {S.PENDING}, S.PENDING, OPERATOR, fenced=False),
        # Waiting work of a key at its limit leaves the claim's line, and goes back in line
        # when the key has room (apps/engine/claim/rules.py); the status stays PENDING.
        _t("set_aside", {S.PENDING}, S.PENDING, DISPATCHER, fenced=False),
        _t("put_back", {S.PENDING}, S.PENDING, DISPATCHER, fenced=False),
    )
}


@dataclass(frozen=True)
class WorkflowTransition:
    """A workflow's status move (§16), made in the transaction of the job move that decides it."""

    name: str
    sources: frozenset[WorkflowStatus]
    targets: frozenset[WorkflowStatus]
    events: tuple[Event, ...] = ()


WORKFLOW_TRANSITIONS: dict[str, WorkflowTransition] = {
    t.name: t
    for t in (
        # Its last unfinished job finished: COMPLETED, FAILED if one of its jobs failed,
        # CANCELLED after a workflow cancel.
        WorkflowTransition(
            "finish",
            frozenset({WorkflowStatus.RUNNING}),
            frozenset({WorkflowStatus.COMPLETED, WorkflowStatus.FAILED, WorkflowStatus.CANCELLED}),
            (events.WORKFLOW_FINISHED,),
        ),
        # An operator's retry of one of its failed or cancelled jobs.
        WorkflowTransition(
            "reopen",
            frozenset({WorkflowStatus.FAILED, WorkflowStatus.CANCELLED}),
            frozenset({WorkflowStatus.RUNNING}),
        ),
    )
}


def allows(status: str, name: str) -> bool:
    return status in TRANSITIONS[name].sources
