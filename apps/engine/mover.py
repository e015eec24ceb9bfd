"""The one mover: every write of an execution's status goes through here, in one of three ways.

- `move_row`: a row the caller locked (SELECT … FOR UPDATE) and decided on in Python;
- `move_fenced`: one conditional statement for the holder of the fencing token (the worker's
  start, heartbeat and completion, made per job); `move_fenced_many` for many rows at once,
  and `move_fenced_many_through` for rows taken through several transitions by one statement
  (a short attempt's start and success);
- `move_set`: a statement over a set of rows (a claim, a failed publish, a pause's recall).

`move_workflow` moves a workflow's status (§16) by the same rules, in the transaction of the
job move that decides it.

Each looks the transition up in the table (apps/engine/transitions.py), refuses an actor the
table does not name, and derives the rest from it: the to-state, `version` and `updated_at`
(written by the store's statements), the NOTIFY of the dispatcher when a credit frees up, the
counters, and the domain events the transition must write — a transition whose events are not
given is refused, so no path can forget one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TypeVar

from django.db import transaction

from jobweaver.core import metrics
from jobweaver.core.db import assert_in_transaction
from jobweaver.core.errors import InvalidStateTransition
from jobweaver.engine import signals
from jobweaver.engine.events import Event
from jobweaver.engine.store import events as event_rows
from jobweaver.engine.store import executions as execution_rows
from jobweaver.engine.store import workflows as workflow_rows
from jobweaver.engine.transitions import TRANSITIONS, WORKFLOW_TRANSITIONS, Actor, Transition
from jobweaver.scheduler.models import JobExecution

T = TypeVar("T")


def _transition(name: str, actor: Actor) -> Transition:
    transition = TRANSITIONS[name]
    if actor not in transition.actors:
        raise PermissionError(f"{actor} may not trigger {name}")
    return transition


def _count(transition: Transition, moved: int) -> None:
    counter = metrics.TRANSITIONS.labels(transition.name)
    metrics.count_on_commit(lambda: counter.inc(moved))
    if transition.also_counts:
        also = getattr(metrics, transition.also_counts)
        metrics.count_on_commit(lambda: also.inc(moved))


def events_written() -> None:
    """Tell the relay once the current transaction commits (at once outside one)."""
    transaction.on_commit(_send_events_committed)


def _send_events_committed() -> None:
    signals.events_committed.send(sender=None)


def move_row(
    execution: JobExecution,
    name: str,
    *,
    actor: Actor,
    changes: dict,
    events: dict[Event, dict] | None = None,
) -> JobExecution:
    """Move a locked execution along transition `name`: check the from-state, set the to-state
    and `changes`, bump `version`, save only those fields, and write the transition's events
    (each from its values in `events`) in the same transaction. Raises InvalidStateTransition
    from a wrong state."""
    assert_in_transaction(f"move_row({name})")
    transition = _transition(name, actor)
    if execution.status not in transition.sources:
        raise InvalidStateTransition(
            f"Job {execution.job_id} is {execution.status}; {name} needs "
            f"{' or '.join(sorted(transition.sources))}",
            job_id=execution.job_id,
        )
    events = events or {}
    if set(events) != set(transition.events):
        raise TypeError(f"{name} writes {[e.name for e in transition.events]}")
    changes = {"status": transition.target, **changes}
    for field, value in changes.items():
        setattr(execution, field, value)
    execution.version += 1
    execution_rows.execution_save(execution, [*changes, "version"])
    for event in transition.events:
        event_rows.event_insert(
            topic=event.topic,
            key=str(execution.job_id),
            trace_id=execution.job.trace_id,
            payload=event.payload(**events[event]),
        )
    if transition.frees_a_credit:
        execution_rows.notify_dispatch()
    _count(transition, 1)
    if transition.events:
        events_written()
    return execution


def move_fenced(name: str, *, actor: Actor, statement: Callable[[Transition], T]) -> T:
    """Run the fenced `statement` of transition `name` (a store function given the transition,
    which writes its bookkeeping, NOTIFY and events in the same statement). Its result is
    falsy when the fence refused it: nothing was written, nothing is counted."""
    transition = _transition(name, actor)
    assert transition.fenced, name
    result = statement(transition)
    if result:
        _count(transition, 1)
        if transition.events:
            events_written()
    return result


def move_fenced_many(name: str, *, actor: Actor, statement: Callable[[Transition], list]) -> list:
    """`move_fenced` for many rows in one statement, each fenced by its own token: its result
    is the list of rows moved (the fence's refusals left out)."""
    transition = _transition(name, actor)
    assert transition.fenced, name
    moved = statement(transition)
    if moved:
        _count(transition, len(moved))
        if transition.events:
            events_written()
    return moved


def move_fenced_many_through(
    names: tuple[str, ...], *, actor: Actor, statement: Callable[..., list]
) -> list:
    """`move_fenced_many` for rows that go through several transitions in one statement (each
    from the state the one before left): `statement` is given the transitions, in order, and
    writes the bookkeeping of all of them; each is counted, the events of each written."""
    transitions = [_transition(name, actor) for name in names]
    for before, after in itertools.pairwise(transitions):
        assert before.target in after.sources, f"{after.name} does not follow {before.name}"
    assert all(t.fenced for t in transitions), names
    moved = statement(*transitions)
    if moved:
        for transition in transitions:
            _count(transition, len(moved))
        if any(t.events for t in transitions):
            events_written()
    return moved


def move_set(name: str, *, actor: Actor, statement: Callable[[Transition], T]) -> T:
    """Run the set-based `statement` of transition `name`; its result is the count of rows
    moved or the list of them."""
    transition = _transition(name, actor)
    assert not transition.events, f"{name}: a set-based move writes no events"
    result = statement(transition)
    moved = result if isinstance(result, int) else len(result)
    if moved:
        if transition.frees_a_credit:
            execution_rows.notify_dispatch()
        _count(transition, moved)
    return result


def move_workflow(
    workflow_id, name: str, *, current: str, target: str, name_of: str, trace_id: str
) -> None:
    """Move a workflow from `current` to `target` along workflow transition `name`, writing
    its events (WorkflowFinished at a finish) in the same transaction."""
    assert_in_transaction(f"move_workflow({name})")
    transition = WORKFLOW_TRANSITIONS[name]
    if current not in transition.sources or target not in transition.targets:
        raise InvalidStateTransition(f"workflow {workflow_id} is {current}; {name} to {target}")
    finished_at = workflow_rows.workflow_set_status(
        workflow_id, status=target, finished=name == "finish"
    )
    for event in transition.events:
        event_rows.event_insert(
            topic=event.topic,
            key=str(workflow_id),
            trace_id=trace_id,
            payload=event.payload(
                workflow_id=workflow_id, name=name_of, status=target, finished_at=finished_at
            ),
        )
    counter = metrics.WORKFLOW_TRANSITIONS.labels(f"{name}:{target}")
    metrics.count_on_commit(lambda: counter.inc())
    if transition.events:
        events_written()
