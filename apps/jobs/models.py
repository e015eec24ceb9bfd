"""The submitted job: what to run, for whom, with which limits. Its lifecycle lives in
scheduler.JobExecution; its attempts in executor.ExecutionAttempt."""

import uuid

from django.db import models
from django.db.models.functions import Now

from jobweaver.conf import settings


class JobType(models.TextChoices):
    SIMULATION = "SIMULATION", "Simulation"
    TASK = "TASK", "Python task"  # a registered function run through Django's Tasks API (§13)


def steps_of(instruction: dict) -> list[dict]:
    """A SIMULATION job's steps from its instruction (none for a TASK job)."""
    return list(instruction.get("steps", []))


class Job(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    job_type = models.CharField(max_length=32, choices=JobType.choices, default=JobType.SIMULATION)
    instruction = models.JSONField(
        help_text='SIMULATION: {"steps": [...]}; TASK: {"task", "args", "kwargs"}; validated on '
        "submission"
    )
    # Indexed in Meta, without the varchar_pattern_ops copy `db_index=True` adds: trace ids are
    # only ever matched exactly, and the copy cost an index insert per job for no query.
    trace_id = models.CharField(max_length=64)
    # W3C traceparent of the submitting request when OpenTelemetry is on (apps/core/tracing.py):
    # every attempt's span is its child, so one trace survives retries.
    traceparent = models.CharField(max_length=55, blank=True, default="")
    # NULL (not "") means "no key", so the unique constraint ignores keyless jobs.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    # The request's hash, compared when its idempotency key comes again; "" without a key
    # (nothing reads it then, and a batch of a thousand hashed each request for nothing).
    request_fingerprint = models.CharField(max_length=64, blank=True, default="")
    priority = models.PositiveSmallIntegerField(default=5)
    max_retries = models.PositiveIntegerField()
    run_at = models.DateTimeField(null=True, blank=True)
    timeout_seconds = models.PositiveIntegerField()
    # TASK jobs: the DEP 14 queue name and priority (-100..100) they were enqueued with;
    # `priority` holds its 0-9 mapping, which is what dispatch orders by.
    queue_name = models.CharField(max_length=100, default="default")
    task_priority = models.SmallIntegerField(null=True, blank=True)
    # Unique jobs (apps/jobs/services.py): a submission with a key that matches one of the
    # submitter's jobs in the requested scope returns that job. NULL: no key.
    unique_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    # Concurrency and rate limits (apps/engine/claim/rules.py) count running work and starts per
    # key, e.g. a customer id; NULL: no key, no limit. Copied onto the execution.
    concurrency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    # A TASK's own retry policy (ARCHITECTURE §13a; NULL: the settings'): the exception class
    # paths that are retried (matched against the raised exception's MRO, never imported), the
    # backoff's [base, cap] seconds and its jitter; and the hard timeout of a process pool.
    retry_on = models.JSONField(null=True, blank=True)
    retry_backoff = models.JSONField(null=True, blank=True)
    retry_jitter = models.FloatField(null=True, blank=True)
    hard_timeout_seconds = models.PositiveIntegerField(null=True, blank=True)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        # Who sees and does what (ARCHITECTURE §8, §17): add_job submits, change_job retries
        # and cancels, each on one's own jobs only, in every face (API, admin, dashboard, CLI
        # run as a user); the operator permissions reach every user's jobs.
        permissions = [
            ("view_all_jobs", "Can see every user's jobs"),
            ("operate_all_jobs", "Can retry, cancel and discard every user's jobs"),
            ("submit_high_priority", "Can submit jobs above the priority threshold"),
        ]
        indexes = [
            # The name the btree had under `db_index=True` (migration 0007 keeps that index).
            models.Index(fields=["trace_id"], name="jw_job_trace_id"),
            models.Index(
                fields=["submitted_by", "unique_key", "-created_at"],
                name="jw_job_unique_key",
                condition=models.Q(unique_key__isnull=False),
            ),
        ]
        constraints = [
            # One job per (user, key); CLI submissions without a user share one scope.
            models.UniqueConstraint(
                fields=["submitted_by", "idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                nulls_distinct=False,
                name="jw_job_idempotency_key_per_user",
            ),
            models.CheckConstraint(
                condition=models.Q(priority__lte=9), name="jw_job_priority_0_to_9"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_type} {self.id}"

    @property
    def steps(self) -> list[dict]:
        return steps_of(self.instruction)


class DeadLetterDiscard(models.Model):
    """An operator decided that a dead-lettered job needs nothing more.

    The job stays FAILED with its whole history (a discard is no new state of ARCHITECTURE §4);
    it only leaves the dead-letter desk. A discard counts for the failure it was made on: a job
    that is retried and dead-letters again (a later `finished_at`) is back on the desk.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="+")
    discarded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    discarded_at = models.DateTimeField(db_default=Now())
    # The error the job was dead-lettered with, as the operator saw it.
    final_error = models.TextField(blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["job", "-discarded_at"], name="jw_discard_job_latest")]

    def __str__(self) -> str:
        return f"{self.job_id} discarded at {self.discarded_at}"
