"""One ExecutionAttempt per delivery of a job to a worker; its event id is the idempotency key
of that delivery (a redelivered message finds its attempt and does not run again)."""

from django.db import models


class AttemptOutcome(models.TextChoices):
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    CANCELLED = "CANCELLED"
    LOST = "LOST"
    # The task asked to run again later (ARCHITECTURE §13a): not a failure, no retry used.
    SNOOZED = "SNOOZED"


class ExecutionAttempt(models.Model):
    event_id = models.UUIDField(primary_key=True)
    # No index of its own: the unique (job, attempt) index serves every lookup by job.
    job = models.ForeignKey(
        "jobweaver_jobs.Job", on_delete=models.CASCADE, related_name="attempts", db_index=False
    )
    attempt = models.PositiveIntegerField()
    trace_id = models.CharField(max_length=64)
    worker_id = models.CharField(max_length=200)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(
        max_length=16, choices=AttemptOutcome.choices, default=AttemptOutcome.RUNNING
    )
    error_message = models.TextField(blank=True, default="")
    steps_completed = models.PositiveIntegerField(default=0)
    total_steps = models.PositiveIntegerField(default=0)
    # Messages of LOG steps, kept with the attempt for operators.
    log_lines = models.JSONField(default=list, blank=True)
    # TASK jobs (§13): the return value of a SUCCESS (recorded in the same transaction), and
    # the exception of a FAILURE: its class path and a shortened traceback.
    result = models.JSONField(null=True, blank=True)
    exception_type = models.CharField(max_length=255, blank=True, default="")
    traceback = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["job", "attempt"]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "attempt"], name="jw_attempt_number_unique_per_job"
            )
        ]

    def __str__(self) -> str:
        return f"{self.job_id} #{self.attempt} {self.outcome}"
