"""What the cockpit records beyond the job's own state."""

from django.conf import settings
from django.db import models
from django.db.models.functions import Now


class DeadLetterDiscard(models.Model):
    """An operator decided that a dead-lettered job needs nothing more.

    The job stays FAILED with its whole history (a discard is no new state of ARCHITECTURE §4);
    it only leaves the dead-letter desk. A discard counts for the failure it was made on: a job
    that is retried and dead-letters again (a later `finished_at`) is back on the desk.
    """

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="+")
    discarded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    discarded_at = models.DateTimeField(db_default=Now())
    # The error the job was dead-lettered with, as the operator saw it.
    final_error = models.TextField(blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["job", "-discarded_at"], name="discard_job_latest")]

    def __str__(self) -> str:
        return f"{self.job_id} discarded at {self.discarded_at}"
