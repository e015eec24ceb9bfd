"""The admin's "Submit a job" form: SIMULATION steps or a registered Python task, turned into
the API's request body and validated by the API's own parser (apps/jobs/validation.py)."""

from __future__ import annotations

import json

from django import forms
from django.conf import settings

from apps.core.errors import JobWeaverError
from apps.jobs.python_tasks.registry import registered_paths
from apps.jobs.validation import JobSpec, parse_job_request

EXAMPLE_STEPS = json.dumps(
    [{"action": "LOG", "message": "hello"}, {"action": "SLEEP", "durationMs": 500}], indent=2
)


def _json(raw: str, field: str):
    try:
        return json.loads(raw)
    except json.JSONDecodeError as error:
        raise forms.ValidationError(
            {field: f"not JSON: {error.msg} (line {error.lineno})"}
        ) from None


class JobSubmitForm(forms.Form):
    job_type = forms.ChoiceField(
        choices=[("SIMULATION", "Simulation steps"), ("TASK", "Python task")], initial="SIMULATION"
    )
    steps = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 8, "cols": 70, "class": "jw-mono"}),
        initial=EXAMPLE_STEPS,
        help_text='SIMULATION: a JSON list of steps, or {"steps": [...]} (ARCHITECTURE §7).',
    )
    task = forms.ChoiceField(
        required=False, help_text="TASK: one of the registered tasks (nothing else can run)."
    )
    args = forms.CharField(required=False, initial="[]", help_text="TASK: a JSON list.")
    kwargs = forms.CharField(required=False, initial="{}", help_text="TASK: a JSON object.")
    priority = forms.IntegerField(min_value=0, max_value=9, initial=5)
    max_retry_count = forms.IntegerField(required=False, min_value=0, label="Max retries")
    timeout_seconds = forms.IntegerField(required=False, min_value=1)
    run_at = forms.CharField(
        required=False, help_text="ISO-8601 with an offset, e.g. 2030-01-01T09:00:00Z; empty: now"
    )
    idempotency_key = forms.CharField(required=False, max_length=255)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["task"].choices = [("", "—"), *((p, p) for p in registered_paths())]

    def request_body(self) -> dict:
        """The POST /api/jobs body this form stands for."""
        data = self.cleaned_data
        if data["job_type"] == "TASK":
            payload = {
                "task": data["task"],
                "args": _json(data["args"] or "[]", "args"),
                "kwargs": _json(data["kwargs"] or "{}", "kwargs"),
            }
        else:
            steps = _json(data["steps"] or "[]", "steps")
            payload = steps if isinstance(steps, dict) else {"steps": steps}
        body = {"jobType": data["job_type"], "payload": payload, "priority": data["priority"]}
        for field, name in (
            ("max_retry_count", "maxRetryCount"),
            ("timeout_seconds", "timeoutSeconds"),
            ("run_at", "runAt"),
        ):
            if data.get(field) not in (None, ""):
                body[name] = data[field]
        return body

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        if cleaned["job_type"] == "TASK" and not cleaned.get("task"):
            raise forms.ValidationError({"task": "choose the task to run"})
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
