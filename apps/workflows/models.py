"""Workflows: jobs that depend on jobs (ARCHITECTURE §16).

A workflow is a set of ordinary jobs submitted together; `Dependency` rows are its edges, and
each job's `Node` holds its place in the workflow (its ref) and the engine's count of its
dependencies not yet settled. The engine (apps/engine/workflows.py) alone writes the counters
and the statuses: a job whose count reaches zero goes WAITING → PENDING in the transaction
that settled its last dependency, and the workflow finishes when its own count of unfinished
jobs reaches zero. Each count is one row, updated under that row's lock, so concurrent
completions on many executors release a job and finish a workflow exactly once.
"""

import uuid

from django.db import models
from django.db.models.functions import Now

from jobweaver.conf import settings


class WorkflowStatus(models.TextChoices):
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


class Workflow(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    status = models.CharField(
        max_length=16, choices=WorkflowStatus.choices, default=WorkflowStatus.RUNNING
    )
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    trace_id = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())
    finished_at = models.DateTimeField(null=True, blank=True)
    # The engine's counts: jobs not in a terminal status, and jobs FAILED (a failure ignored by
    # its dependents still counts). The workflow finishes when `unfinished` reaches zero.
    unfinished = models.PositiveIntegerField()
    failed = models.PositiveIntegerField(default=0)
    # Set by a workflow cancel, so its finish is CANCELLED; cleared when a retry reopens it.
    cancelled = models.BooleanField(default=False)
    version = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(fields=["submitted_by", "-created_at"], name="jw_workflow_by_owner"),
            models.Index(fields=["status", "-created_at"], name="jw_workflow_by_status"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"


class Node(models.Model):
    """A job's place in its workflow."""

    job = models.OneToOneField(
        "jobweaver_jobs.Job",
        primary_key=True,
        on_delete=models.CASCADE,
        related_name="workflow_node",
    )
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="nodes")
    ref = models.CharField(max_length=64)
    position = models.PositiveIntegerField(default=0)  # its place in the submitted list
    ignore_failed_dependencies = models.BooleanField(default=False)
    # A TASK job built by the Python canvas (apps/workflows/canvas.py, Celery's rules) gets
    # its dependencies' return values as its first argument: "first" (a chain: its one
    # parent's value), "list" (a chord's callback: its group's values in order), "" (none).
    parent_results_as = models.CharField(max_length=8, blank=True, default="")
    # Dependencies not settled yet: not COMPLETED (or, with ignore_failed_dependencies, not
    # finished at all). The job leaves WAITING when it reaches zero.
    waiting_on = models.PositiveIntegerField(default=0)
    # The dependency whose failure cancelled this job: an operator's retry of that job brings
    # this one back to WAITING.
    cancelled_by = models.ForeignKey(
        "jobweaver_jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workflow", "ref"], name="jw_node_ref_unique"),
        ]
        indexes = [
            models.Index(
                fields=["cancelled_by"],
                name="jw_node_cancelled_by",
                condition=models.Q(cancelled_by__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.ref} ({self.job_id})"


class Dependency(models.Model):
    """An edge: `job` runs after `depends_on`."""

    # Indexed by the unique constraint (job first); depends_on by its own index (dependents).
    job = models.ForeignKey(
        "jobweaver_jobs.Job", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    depends_on = models.ForeignKey("jobweaver_jobs.Job", on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "depends_on"], name="jw_dependency_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} after {self.depends_on_id}"
