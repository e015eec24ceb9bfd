"""Validation of a workflow (ARCHITECTURE §16). Pure: no ORM, no request objects.

`parse_workflow_request` takes the decoded body of `POST /api/workflows`; `checked_graph`
holds any list of items (the API's, or the Python canvas's, apps/workflows/canvas.py) to the
rules of a workflow: refs unique and well formed, every `dependsOn` a known ref, no job
depending on itself or twice on one job, at most JOBWEAVER_MAX_WORKFLOW_JOBS jobs and
JOBWEAVER_MAX_WORKFLOW_EDGES_PER_JOB dependencies each, and no cycle. Each refusal is an
`InvalidRequest` naming the problem; nothing is stored.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from jobweaver.conf import settings
from jobweaver.core.errors import InvalidBatch, InvalidRequest
from jobweaver.jobs.checks import checked_object, checked_str, type_name
from jobweaver.jobs.validation import JobSpec, parse_job_request

REF = re.compile(r"[A-Za-z0-9_-]{1,64}")
NAME_MAX_CHARS = 200
ITEM_FIELDS = {"ref", "dependsOn", "job", "ignoreFailedDependencies"}


@dataclass(frozen=True)
class WorkflowItem:
    ref: str
    spec: JobSpec
    depends_on: tuple[str, ...] = ()
    ignore_failed_dependencies: bool = False
    parent_results_as: str = ""  # the Python canvas's "first" or "list" (models.Node)


@dataclass(frozen=True)
class WorkflowSpec:
    name: str
    items: list[WorkflowItem] = field(default_factory=list)


def parse_workflow_request(body: Any) -> WorkflowSpec:
    """Validate `{"name", "jobs": [{"ref", "dependsOn", "job", "ignoreFailedDependencies"}]}`;
    each job as `POST /api/jobs` validates it, each refusal named by its index and ref."""
    checked_object(body, "request body", {"name", "jobs"}, {"name", "jobs"})
    name = checked_name(body["name"])
    entries = body["jobs"]
    if not isinstance(entries, list):
        raise InvalidRequest(f"jobs must be an array, got {type_name(entries)}")
    _check_size(len(entries))
    items, errors = [], []
    for index, entry in enumerate(entries):
        try:
            items.append(_item(entry, index))
        except InvalidRequest as exc:
            errors.append({"index": index, "message": exc.message})
    if errors:
        raise InvalidBatch(
            f"{len(errors)} of {len(entries)} jobs rejected; nothing was submitted", errors=errors
        )
    return WorkflowSpec(name=name, items=checked_graph(items))


def checked_name(name: Any) -> str:
    name = checked_str(name, "name", NAME_MAX_CHARS, allow_empty=False)
    if name != name.strip() or not name.isprintable():
        raise InvalidRequest("name must be printable, without leading or trailing spaces")
    return name


def _item(entry: Any, index: int) -> WorkflowItem:
    path = f"jobs[{index}]"
    checked_object(entry, path, ITEM_FIELDS, {"ref", "job"})
    ref = entry["ref"]
    if not isinstance(ref, str) or not REF.fullmatch(ref):
        raise InvalidRequest(f"{path}.ref must be 1-64 letters, digits, _ or -, got {ref!r}")
    path = f"jobs[{index}] (ref {ref!r})"
    depends_on = entry.get("dependsOn", [])
    if not isinstance(depends_on, list) or not all(isinstance(r, str) for r in depends_on):
        raise InvalidRequest(f"{path}.dependsOn must be an array of refs")
    ignore = entry.get("ignoreFailedDependencies", False)
    if not isinstance(ignore, bool):
        raise InvalidRequest(f"{path}.ignoreFailedDependencies must be a boolean")
    try:
        spec = parse_job_request(entry["job"])
    except InvalidRequest as exc:
        raise InvalidRequest(f"{path}.job: {exc.message}") from None
    if spec.unique_key is not None:
        raise InvalidRequest(f"{path}.job: uniqueKey is not available in a workflow")
    return WorkflowItem(ref, spec, tuple(depends_on), ignore)


def _check_size(count: int) -> None:
    limit = settings.JOBWEAVER_MAX_WORKFLOW_JOBS
    if not 0 < count <= limit:
        raise InvalidRequest(f"a workflow holds 1 to {limit} jobs, got {count}")


def checked_graph(items: list[WorkflowItem]) -> list[WorkflowItem]:
    """The items, if they form a workflow: else InvalidRequest naming the first problem."""
    _check_size(len(items))
    refs: dict[str, WorkflowItem] = {}
    for item in items:
        if item.ref in refs:
            raise InvalidRequest(f"ref {item.ref!r} is used twice")
        refs[item.ref] = item
    most = settings.JOBWEAVER_MAX_WORKFLOW_EDGES_PER_JOB
    for item in items:
        if len(item.depends_on) > most:
            raise InvalidRequest(
                f"ref {item.ref!r} depends on {len(item.depends_on)} jobs; at most {most}"
            )
        if len(set(item.depends_on)) != len(item.depends_on):
            raise InvalidRequest(f"ref {item.ref!r} names a dependency twice")
        for parent in item.depends_on:
            if parent == item.ref:
                raise InvalidRequest(f"ref {item.ref!r} depends on itself")
            if parent not in refs:
                raise InvalidRequest(f"ref {item.ref!r} depends on unknown ref {parent!r}")
    cycle = _cycle(items)
    if cycle:
        raise InvalidRequest(f"dependencies form a cycle: {' -> '.join(cycle)}")
    return items


def _cycle(items: list[WorkflowItem]) -> list[str]:
    """A cycle among the refs (its refs, the first repeated at the end), or []. Kahn's order
    removes every job whose dependencies are all removed; what is left lies on or behind a
    cycle, and following dependencies from there must come back to one."""
    waiting = {item.ref: len(item.depends_on) for item in items}
    dependents: dict[str, list[str]] = {item.ref: [] for item in items}
    for item in items:
        for parent in item.depends_on:
            dependents[parent].append(item.ref)
    ready = deque(ref for ref, count in waiting.items() if count == 0)
    while ready:
        for child in dependents[ready.popleft()]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    left = {ref for ref, count in waiting.items() if count > 0}
    if not left:
        return []
    parents = {item.ref: [p for p in item.depends_on if p in left] for item in items}
    path, seen = [], {}
    ref = min(left)
    while ref not in seen:
        seen[ref] = len(path)
        path.append(ref)
        ref = parents[ref][0]
    return [*path[seen[ref] :], ref][::-1]
