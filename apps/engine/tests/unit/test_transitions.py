"""The transition table of apps/engine/transitions.py, held against ARCHITECTURE §4."""

from jobweaver.engine.transitions import IN_FLIGHT, TRANSITIONS, Actor
from jobweaver.scheduler.models import TERMINAL_STATUSES, ExecutionStatus

W = ExecutionStatus.WAITING
P, D, R = ExecutionStatus.PENDING, ExecutionStatus.DISPATCHED, ExecutionStatus.RUNNING
C, F, X = ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED

# Every status change ARCHITECTURE §4 allows, as (from, to) edges. Self-loops (heartbeat,
# hold, request_cancel) change leases or flags, not the status.
SECTION_4_EDGES = {
    (P, D),  # dispatch
    (D, R),  # a worker starts the delivery
    (R, C),  # success
    (R, P),  # failure with retries left; a released attempt (shutdown)
    (R, F),  # retries exhausted or non-retryable: dead letter
    (P, X),
    (D, X),  # cancel at once
    (R, X),  # cooperative cancel
    (D, P),  # dispatch lease expired: a redelivery, not an attempt
    (F, P),
    (X, P),  # operator retry
    (W, P),  # a workflow's job whose dependencies are done (§16)
    (W, X),  # a dependency failed, or a cancel
    (X, W),  # the retry of the dependency that cancelled it
}
# Moves of a workflow's WAITING jobs, made in the transaction of the move that decides them
# (a worker's fenced completion, the rescuer's, an operator's): a WAITING job has no delivery,
# so there is no token to fence on.
CONSEQUENCES = {"unblock", "dependency_failed"}


def test_the_table_allows_exactly_the_edges_of_section_4():
    edges = {
        (source, transition.target)
        for transition in TRANSITIONS.values()
        for source in transition.sources
        if source != transition.target
    }
    assert edges == SECTION_4_EDGES


def test_nothing_leaves_a_terminal_state_but_an_operator_retry():
    for name, transition in TRANSITIONS.items():
        if transition.sources & set(TERMINAL_STATUSES) - {C}:
            assert name in {"operator_retry", "reopen"}  # reopen: a retry's consequence (§16)
            assert transition.actors == {Actor.OPERATOR}
        assert C not in transition.sources, f"{name} leaves COMPLETED"


def test_worker_driven_transitions_are_fenced_and_operator_ones_are_not():
    for name, transition in TRANSITIONS.items():
        if Actor.WORKER in transition.actors or Actor.RESCUER in transition.actors:
            assert transition.fenced or name in CONSEQUENCES, f"{name} must be fenced"
            assert not transition.fenced or W not in transition.sources
        if transition.actors == {Actor.OPERATOR}:
            assert not transition.fenced, name


def test_only_the_rescuer_a_failed_publish_or_a_stopping_executor_redelivers_no_attempt():
    redeliver = TRANSITIONS["redeliver"]
    assert (redeliver.sources, redeliver.target) == ({D}, P)
    # The worker: an executor shutting down gives back the deliveries it did not start.
    assert redeliver.actors == {Actor.RESCUER, Actor.DISPATCHER, Actor.WORKER}
    # A lost RUNNING lease goes through the failure transitions (an attempt, a retry used).
    for name in ("retry", "dead_letter", "end_cancelled"):
        assert TRANSITIONS[name].sources == {R}
        assert Actor.RESCUER in TRANSITIONS[name].actors


def test_in_flight_is_what_holds_a_credit():
    assert {D, R} == IN_FLIGHT
    assert TRANSITIONS["dispatch"].target in IN_FLIGHT


def test_run_now_only_moves_a_pending_jobs_due_time_and_only_for_an_operator():
    run_now = TRANSITIONS["run_now"]
    assert (run_now.sources, run_now.target) == ({P}, P)
    assert run_now.actors == {Actor.OPERATOR}
    assert not run_now.fenced
