"""Writes of workflows (ARCHITECTURE §16): submit one, cancel one. What a job's finish does to
its workflow is the engine's (apps/engine/workflows.py), in that job's transaction."""

from __future__ import annotations

import logging
import time
import uuid

from django.db import OperationalError, transaction
from psycopg import errors as pg_errors

from jobweaver.core.db import lock_timed_out
from jobweaver.core.errors import InvalidStateTransition, WorkflowNotFound
from jobweaver.core.logcontext import log_context
from jobweaver.engine import workflows as engine_workflows
from jobweaver.jobs.services import job_retry, jobs_create_waiting
from jobweaver.workflows.models import Dependency, Node, Workflow, WorkflowStatus
from jobweaver.workflows.validation import WorkflowSpec

logger = logging.getLogger(__name__)

# A workflow cancel locks its unfinished executions without waiting (engine_workflows): when a
# worker holds one for a moment, it tries again this often, for at most this long.
CANCEL_RETRY_SECONDS = 0.05
CANCEL_PATIENCE_SECONDS = 5.0


@transaction.atomic
def workflow_submit(*, spec: WorkflowSpec, submitted_by=None, trace_id: str | None = None):
    """Store a validated workflow, all or nothing: its jobs (those with dependencies WAITING,
    the others PENDING and dispatched after commit), their nodes and edges, and the workflow.
    Returns the Workflow with `jobs_by_ref` (ref → Job)."""
    trace_id = trace_id or uuid.uuid4().hex
    waiting = {index for index, item in enumerate(spec.items) if item.depends_on}
    jobs = jobs_create_waiting(
        specs=[item.spec for item in spec.items],
        waiting=waiting,
        submitted_by=submitted_by,
        trace_id=trace_id,
    )
    workflow = Workflow.objects.create(
        name=spec.name, submitted_by=submitted_by, trace_id=trace_id, unfinished=len(jobs)
    )
    by_ref = {item.ref: job for item, job in zip(spec.items, jobs, strict=True)}
    Node.objects.bulk_create(
        Node(
            job=job,
            workflow=workflow,
            ref=item.ref,
            position=position,
            parent_results_as=item.parent_results_as,
            ignore_failed_dependencies=item.ignore_failed_dependencies,
            waiting_on=len(item.depends_on),
        )
        for position, (item, job) in enumerate(zip(spec.items, jobs, strict=True))
    )
    # Created in each job's dependsOn order (their ids keep it): a chord's callback gets its
    # group's results in the group's order.
    Dependency.objects.bulk_create(
        Dependency(job=by_ref[item.ref], depends_on=by_ref[parent])
        for item in spec.items
        for parent in item.depends_on
    )
    workflow.jobs_by_ref = by_ref
    with log_context(trace_id=trace_id):
        logger.info("workflow %s (%s) submitted with %d jobs", workflow.id, spec.name, len(jobs))
    return workflow


def workflow_cancel(*, workflow_id: uuid.UUID) -> Workflow:
    """Cancel every unfinished job of a RUNNING workflow (RUNNING ones stop at their next
    checkpoint); 409 when it has finished. A worker holding one of its jobs for a moment makes
    the cancel try again, briefly; past that, the lock error (the API's 429) is raised."""
    deadline = time.monotonic() + CANCEL_PATIENCE_SECONDS
    while True:
        try:
            return _cancel(workflow_id)
        except OperationalError as exc:
            # A row a worker holds (NOWAIT), or a deadlock PostgreSQL broke by rolling this
            # transaction back: nothing was changed, try again.
            busy = lock_timed_out(exc) or isinstance(exc.__cause__, pg_errors.DeadlockDetected)
            if not busy or time.monotonic() > deadline:
                raise
            time.sleep(CANCEL_RETRY_SECONDS)


@transaction.atomic
def _cancel(workflow_id: uuid.UUID) -> Workflow:
    workflow = Workflow.objects.filter(id=workflow_id).first()
    if workflow is None:
        raise WorkflowNotFound(f"Workflow {workflow_id} not found")
    if workflow.status != WorkflowStatus.RUNNING:
        raise InvalidStateTransition(
            f"Workflow {workflow_id} is {workflow.status}; only a RUNNING workflow can be cancelled"
        )
    cancelled = engine_workflows.workflow_cancel(workflow_id)
    logger.info("workflow %s cancelled (%d jobs at once)", workflow_id, len(cancelled))
    workflow.refresh_from_db()
    return workflow


@transaction.atomic
def workflow_retry_failed(*, workflow_id: uuid.UUID) -> list[uuid.UUID]:
    """An operator's retry of every FAILED job of the workflow (each as `job_retry`), all or
    none (the active-jobs cap may refuse one): the jobs their failures cancelled wait again
    and the workflow runs again. Returns the jobs retried."""
    failed = list(
        Node.objects.filter(workflow_id=workflow_id, job__execution__status="FAILED")
        .order_by("position")
        .values_list("job_id", flat=True)
    )
    if not Workflow.objects.filter(id=workflow_id).exists():
        raise WorkflowNotFound(f"Workflow {workflow_id} not found")
    if not failed:
        raise InvalidStateTransition(f"Workflow {workflow_id} has no FAILED job to retry")
    for job_id in failed:
        job_retry(job_id=job_id)
    return failed
