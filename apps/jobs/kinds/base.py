"""`JobKind`: what every kind of job says about itself. The defaults suit a kind with nothing
beyond the common fields; a kind overrides what differs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django import forms
from rest_framework import serializers

from jobweaver.conf import settings
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.models import Job
from jobweaver.scheduler.models import JobExecution

# The admin form's JSON reader: the text of one field, decoded, or a form error naming it.
ReadJson = Callable[[str, str], Any]


class JobKind:
    name: ClassVar[str]  # its JobType value (apps/jobs/models.py), the API's jobType
    form_label: ClassVar[str]  # its choice in the admin's "Submit a job" form
    # The OpenAPI description of its payload (apps/jobs/api/schema.py); None: not described.
    payload_schema: ClassVar[type[serializers.Serializer] | None] = None

    # --- validation (apps/jobs/validation.py) -------------------------------------------------

    def max_timeout_seconds(self) -> int:
        """The highest `timeoutSeconds` a job of this kind may ask for."""
        return settings.JOBWEAVER_MAX_TIMEOUT_SECONDS

    def parse_payload(self, payload: Any) -> dict:
        """The validated `payload` of a request, as JobSpec fields; InvalidRequest if not."""
        raise NotImplementedError

    # --- detail (apps/jobs/representation.py) -------------------------------------------------

    def total_steps(self, job: Job, latest: ExecutionAttempt | None) -> int:
        """The progress's totalSteps; `latest` is the job's latest attempt."""
        raise NotImplementedError

    def attempt_detail(self, attempt: ExecutionAttempt) -> dict:
        """Fields an attempt of this kind shows beyond the common ones (ARCHITECTURE §8)."""
        return {}

    def job_detail(self, execution: JobExecution, attempts: list[ExecutionAttempt]) -> dict:
        """Fields a job of this kind shows beyond the common ones."""
        return {}

    # --- admin (apps/jobs/admin.py, apps/jobs/forms.py) ----------------------------------

    shows_result: ClassVar[bool] = False  # the job page has a "Result" section

    def admin_payload(self, job: Job) -> Any:
        """What the admin shows as the job's payload (JSON)."""
        return job.instruction

    def admin_result(self, job: Job) -> str:
        """The job's result as the admin's change form shows it (HTML); "-": none."""
        return "-"

    def form_fields(self) -> dict[str, forms.Field]:
        """The inputs of this kind in the admin's "Submit a job" form."""
        return {}

    def form_payload(self, data: dict, read_json: ReadJson) -> Any:
        """The request's payload from the form's cleaned `data`."""
        raise NotImplementedError

    def form_errors(self, data: dict) -> dict[str, str]:
        """Inputs this kind needs that the form left empty: {field: message}."""
        return {}

    def __repr__(self) -> str:
        return f"<job kind {self.name}>"
