"""The admin's "Submit a job" form: SIMULATION steps or a registered Python task, turned into
the API's request body and validated by the API's own parser (apps/jobs/validation.py)."""

from __future__ import annotations

import json

from django import forms

from jobweaver.conf import settings
from jobweaver.core.errors import JobWeaverError
from jobweaver.jobs.kinds import SIMULATION, all_kinds, kind_named
from jobweaver.jobs.validation import JobSpec, parse_job_request


def _json(raw: str, field: str):
    try:
        return json.loads(raw)
    except json.JSONDecodeError as error:
        raise forms.ValidationError(
            {field: f"not JSON: {error.msg} (line {error.lineno})"}
        ) from None


class JobSubmitForm(forms.Form):
    job_type = forms.ChoiceField(
        choices=[(kind.name, kind.form_label) for kind in all_kinds()], initial=SIMULATION.name
    )
    # Each kind's own inputs (apps/jobs/kinds/) go here, after job_type.
    priority = forms.IntegerField(min_value=0, max_value=9, initial=5)
    max_retry_count = forms.IntegerField(required=False, min_value=0, label="Max retries")
    timeout_seconds = forms.IntegerField(required=False, min_value=1)
    run_at = forms.CharField(
        required=False, help_text="ISO-8601 with an offset, e.g. 2030-01-01T09:00:00Z; empty: now"
    )
    idempotency_key = forms.CharField(required=False, max_length=255)
    queue_name = forms.CharField(
        required=False,
        max_length=64,
        label="Queue",
        help_text="the executors that serve this queue run the job; empty: default",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Built per form: a TASK's choices are the tasks registered now.
        kind_fields = {name: f for kind in all_kinds() for name, f in kind.form_fields().items()}
        self.fields = {"job_type": self.fields.pop("job_type"), **kind_fields, **self.fields}

    def request_body(self) -> dict:
        """The POST /api/jobs body this form stands for."""
        data = self.cleaned_data
        payload = kind_named(data["job_type"]).form_payload(data, _json)
        body = {"jobType": data["job_type"], "payload": payload, "priority": data["priority"]}
        for field, name in (
            ("max_retry_count", "maxRetryCount"),
            ("timeout_seconds", "timeoutSeconds"),
            ("run_at", "runAt"),
            ("queue_name", "queueName"),
        ):
            if data.get(field) not in (None, ""):
                body[name] = data[field]
        return body

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        missing = kind_named(cleaned["job_type"]).form_errors(cleaned)
        if missing:
            raise forms.ValidationError(missing)
        body = self.request_body()
        if len(json.dumps(body).encode()) > settings.JOBWEAVER_MAX_REQUEST_BYTES:
            raise forms.ValidationError(
                f"the job is larger than {settings.JOBWEAVER_MAX_REQUEST_BYTES} bytes"
            )
        try:
            self.spec: JobSpec = parse_job_request(body)
        except JobWeaverError as error:
            raise forms.ValidationError(error.message) from None
        return cleaned
