"""The lifecycle of a job: one JobExecution per job (ARCHITECTURE §3, §4)."""

import uuid

from django.db import models


class ExecutionStatus(models.TextChoices):
    PENDING = "PENDING"
    DISPATCHED = "DISPATCHED"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


TERMINAL_STATUSES = (ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED)


class JobExecution(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="execution")
    status = models.CharField(
        max_length=16, choices=ExecutionStatus.choices, default=ExecutionStatus.PENDING
    )
    # Copied from the job so the due-work index covers the dispatch query on its own.
    priority = models.PositiveSmallIntegerField(default=5)
    retry_count = models.PositiveIntegerField(default=0)
    max_retries = models.PositiveIntegerField()
    next_run_at = models.DateTimeField()
    attempt_count = models.PositiveIntegerField(default=0)
    # Fencing token of the live delivery: only the worker holding it may move the execution on.
    current_event_id = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    last_error = models.TextField(blank=True, default="")
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    version = models.PositiveIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(
                models.F("priority").desc(),
                "next_run_at",
                name="execution_due_work",
                condition=models.Q(status="PENDING"),
            ),
            models.Index(
                "lease_expires_at",
                name="execution_live_leases",
                condition=models.Q(status__in=["DISPATCHED", "RUNNING"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} {self.status}"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES
