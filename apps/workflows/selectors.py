"""Reads of workflows (ARCHITECTURE §16), scoped like jobs: a user sees their own workflows, or
all with `jobs.view_all_jobs` (§17); another owner's workflow is a 404."""

from __future__ import annotations

import uuid

from django.db.models import Count, QuerySet

from jobweaver.accounts.selectors import holds
from jobweaver.core.errors import InvalidRequest, WorkflowNotFound
from jobweaver.core.timeutil import iso
from jobweaver.jobs.selectors import VIEW_ALL_JOBS
from jobweaver.workflows.models import Dependency, Node, Workflow, WorkflowStatus

STATUSES = WorkflowStatus.values


def _visible(user) -> QuerySet[Workflow]:
    workflows = Workflow.objects.all()
    if user is not None and not holds(user, VIEW_ALL_JOBS):
        workflows = workflows.filter(submitted_by=user)
    return workflows


def workflow_get(*, workflow_id, user=None) -> Workflow:
    """A workflow visible to `user` (None: a trusted caller), or WorkflowNotFound."""
    try:
        parsed = uuid.UUID(str(workflow_id))
    except ValueError:
        raise WorkflowNotFound(f"Workflow {str(workflow_id)[:100]} not found") from None
    workflow = _visible(user).filter(id=parsed).first()
    if workflow is None:
        raise WorkflowNotFound(f"Workflow {parsed} not found")
    return workflow


def workflow_list(
    *, user=None, status: str | None = None, page: int = 0, size: int = 20
) -> tuple[list[Workflow], int]:
    """A page of the workflows visible to `user`, newest first, and how many there are."""
    workflows = _visible(user)
    if status is not None:
        if status not in STATUSES:
            raise InvalidRequest(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
        workflows = workflows.filter(status=status)
    total = workflows.count()
    return list(workflows.order_by("-created_at", "id")[page * size : (page + 1) * size]), total


def workflow_nodes(workflow: Workflow) -> list[dict]:
    """Its jobs in submission order: ref, job id, status, and the refs they depend on."""
    nodes = list(
        Node.objects.filter(workflow=workflow).select_related("job__execution").order_by("position")
    )
    ref_of = {node.job_id: node.ref for node in nodes}
    parents: dict[uuid.UUID, list[str]] = {node.job_id: [] for node in nodes}
    edges = Dependency.objects.filter(job_id__in=ref_of).order_by("id")
    for job_id, parent in edges.values_list("job_id", "depends_on_id"):
        parents[job_id].append(ref_of[parent])
    return [
        {
            "ref": node.ref,
            "jobId": str(node.job_id),
            "status": node.job.execution.status,
            "dependsOn": parents[node.job_id],
            "ignoreFailedDependencies": node.ignore_failed_dependencies,
        }
        for node in nodes
    ]


def workflow_to_dict(workflow: Workflow, *, jobs: bool = True) -> dict:
    summary = {
        "workflowId": str(workflow.id),
        "name": workflow.name,
        "status": workflow.status,
        "createdAt": iso(workflow.created_at),
        "finishedAt": iso(workflow.finished_at),
        "unfinishedJobs": workflow.unfinished,
        "failedJobs": workflow.failed,
    }
    if jobs:
        summary["jobs"] = workflow_nodes(workflow)
    return summary


def workflow_counts(*, user=None) -> dict[str, int]:
    """How many workflows are in each status (the dashboard's)."""
    counts = dict.fromkeys(STATUSES, 0)
    for row in _visible(user).values("status").annotate(count=Count("id")).order_by():
        counts[row["status"]] = row["count"]
    return counts
