"""Workflows from Python (ARCHITECTURE §16): `Workflow` for any DAG, and Celery's canvas —
`chain`, `group`, `chord` — over tasks declared with `jobweaver.tasks.task`:

    from jobweaver.workflows import Workflow, chain, chord, group

    chain(add.s(1, 2), add.s(10)).enqueue()              # add(add(1, 2), 10) → 13
    chord(group(add.s(1, 1), add.s(2, 2)), sum_list.s()).enqueue()   # sum_list([2, 4]) → 6

    wf = Workflow("nightly")
    extract = wf.add("extract", extract_task, args=[day])
    wf.add("load", load_task, after=[extract])
    wf.enqueue()

Everything is enqueued in the caller's transaction, as one workflow: the same rows, rules and
guarantees as `POST /api/workflows`. Celery's rules for results hold: in a chain each `.s()`
gets its parent's return value as its first argument and `.si()` gets none; a job after a
group (a chord's callback) gets the group's values as a list, in the group's order. Any TASK
job of a workflow that takes the context reads `context.parent_results` ({ref: value}).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from jobweaver.core.errors import InvalidRequest
from jobweaver.jobs.python_tasks.compat import InvalidTaskError, Task
from jobweaver.workflows.services import workflow_submit
from jobweaver.workflows.validation import (
    WorkflowItem,
    WorkflowSpec,
    checked_graph,
    checked_name,
)


@dataclass(frozen=True)
class Signature:
    """A task with its arguments, not called yet: `task.s(...)` (takes its parent's result
    first) or `task.si(...)` (immutable: takes none)."""

    task: Task
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    immutable: bool = False

    def enqueue(self, name: str | None = None) -> EnqueuedWorkflow:
        return chain(self).enqueue(name)


@dataclass(frozen=True)
class EnqueuedWorkflow:
    """What `enqueue` returns: the workflow's id and its jobs' ids by ref."""

    id: uuid.UUID
    name: str
    jobs: dict[str, uuid.UUID]
    tasks: dict[str, Task] = field(default_factory=dict, repr=False)

    def get_result(self, ref: str):
        """The DEP 14 TaskResult of the job `ref`, as it stands now."""
        return self.tasks[ref].get_result(str(self.jobs[ref]))


def after_enqueue(job_ids: list[uuid.UUID]) -> None:
    """Called with a workflow's jobs once they are written; `jobweaver.testing`'s eager mode
    runs them from here."""


class Workflow:
    """Any DAG of tasks: `add` them with their dependencies (`after`), then `enqueue`."""

    def __init__(self, name: str):
        self.name = name
        self._items: list[WorkflowItem] = []
        self._tasks: dict[str, Task] = {}

    def add(
        self,
        ref: str,
        task: Task | Signature,
        *,
        args: list | tuple = (),
        kwargs: dict | None = None,
        after: list[str] | tuple[str, ...] = (),
        ignore_failed_dependencies: bool = False,
        parent_results_as: str = "",
    ) -> str:
        """Add the job `ref` running `task` (or a signature, with its own arguments) after the
        jobs named in `after`; returns `ref`, to name it in a later `after`."""
        if isinstance(task, Signature):
            args, kwargs, task = (*task.args, *args), {**task.kwargs, **(kwargs or {})}, task.task
        if parent_results_as not in ("", "first", "list"):
            raise ValueError('parent_results_as is "", "first" or "list"')
        spec = _spec(task, list(args), kwargs or {}, takes_parent=bool(parent_results_as))
        self._tasks[ref] = task
        self._items.append(
            WorkflowItem(
                ref=ref,
                spec=spec,
                depends_on=tuple(after),
                ignore_failed_dependencies=ignore_failed_dependencies,
                parent_results_as=parent_results_as,
            )
        )
        return ref

    def enqueue(self) -> EnqueuedWorkflow:
        """Write the workflow in the caller's transaction (all of it or nothing); its jobs
        without dependencies are dispatched when that transaction commits. InvalidRequest
        names what is wrong with the graph."""
        spec = WorkflowSpec(name=checked_name(self.name), items=checked_graph(list(self._items)))
        workflow = workflow_submit(spec=spec)
        jobs = {ref: job.id for ref, job in workflow.jobs_by_ref.items()}
        after_enqueue(list(jobs.values()))
        return EnqueuedWorkflow(
            id=workflow.id, name=workflow.name, jobs=jobs, tasks=dict(self._tasks)
        )


class Group:
    """Signatures run in parallel: `group(a.s(1), b.s(2))`."""

    def __init__(self, *signatures: Signature):
        if not signatures or not all(isinstance(s, Signature) for s in signatures):
            raise TypeError("group() takes one or more signatures (task.s(...) or task.si(...))")
        self.signatures = signatures

    def enqueue(self, name: str | None = None) -> EnqueuedWorkflow:
        return Chain(self).enqueue(name)


class Chain:
    """Signatures and groups run one after the other: `chain(a.s(1), b.s(), group(...))`."""

    def __init__(self, *parts: Signature | Group | Chain):
        self.stages: list[tuple[list[Signature], bool]] = []  # (signatures, is a group)
        for part in parts:
            if isinstance(part, Chain):
                self.stages += part.stages
            elif isinstance(part, Group):
                self.stages.append((list(part.signatures), True))
            elif isinstance(part, Signature):
                self.stages.append(([part], False))
            else:
                raise TypeError(f"chain() takes signatures, groups and chains, not {part!r}")
        if not self.stages:
            raise TypeError("chain() takes at least one signature")

    def enqueue(self, name: str | None = None) -> EnqueuedWorkflow:
        workflow = Workflow(name or "-".join(_task_name(s) for s, _ in self.stages[:3]))
        previous: list[str] = []
        previous_is_group = False
        number = 0
        for signatures, is_group in self.stages:
            refs = []
            for signature in signatures:
                number += 1
                takes = ""
                if previous and not signature.immutable:
                    takes = "list" if previous_is_group else "first"
                refs.append(
                    workflow.add(
                        f"{number}-{signature.task.name}"[:64],
                        signature,
                        after=previous,
                        parent_results_as=takes,
                    )
                )
            previous, previous_is_group = refs, is_group
        return workflow.enqueue()


def chain(*parts: Signature | Group | Chain) -> Chain:
    return Chain(*parts)


def group(*signatures: Signature) -> Group:
    return Group(*signatures)


def chord(header: Group, body: Signature) -> Chain:
    """`body` runs once every job of `header` completed, with their values as a list."""
    if not isinstance(header, Group):
        header = Group(*header)
    return Chain(header, body)


def _task_name(signatures: list[Signature]) -> str:
    return signatures[0].task.name if len(signatures) == 1 else "group"


def _spec(task: Task, args: list, kwargs: dict, *, takes_parent: bool):
    """The task's job; one that takes its parent's result first is checked against its
    function with a stand-in for that value, and stores only its own arguments."""
    if not isinstance(task, Task):
        raise TypeError(f"a workflow runs tasks declared with @task, not {task!r}")
    try:
        if not takes_parent:
            return task.get_backend().job_spec(task, args, kwargs)
        spec = task.get_backend().job_spec(task, [None, *args], kwargs)
    except (InvalidTaskError, InvalidRequest) as exc:
        raise InvalidRequest(f"{task.module_path}: {exc}") from None
    return replace(spec, task={**spec.task, "args": spec.task["args"][1:]})


def signature(task: Task, *args: Any, immutable: bool = False, **kwargs: Any) -> Signature:
    """`task.s(...)` for any DEP 14 task (a JobWeaverTask has `.s` and `.si` itself)."""
    return Signature(task, args, kwargs, immutable)
