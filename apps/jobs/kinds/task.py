"""TASK: a registered Python function run through Django's Tasks API (ARCHITECTURE §13). Its
payload is `{"task", "args", "kwargs"}` (apps/jobs/python_tasks/payload.py); it reports its own
progress and records its return value or exception with its attempt."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.utils.html import format_html
from rest_framework import serializers

from jobweaver.conf import settings
from jobweaver.executor.models import AttemptOutcome, ExecutionAttempt
from jobweaver.jobs.kinds.base import JobKind, ReadJson
from jobweaver.jobs.models import Job, JobType
from jobweaver.jobs.python_tasks.options import declared_policy
from jobweaver.jobs.python_tasks.payload import (
    MAX_TASK_PATH_CHARS,
    TASK_PATH,
    validate_task_payload,
)
from jobweaver.jobs.python_tasks.registry import registered_paths, registry_get
from jobweaver.scheduler.models import ExecutionStatus, JobExecution


def _task_payload_schema() -> type[serializers.Serializer]:
    """The payload's description, made when the API's schema is (the registry is built by
    then): the registered tasks as an enum, so the schema's readers and its fuzzer (make
    fuzz) name tasks that exist; without any, the path's pattern."""
    paths = registered_paths()
    task_help = "the dotted path of a registered task (nothing else can run)"
    if paths:
        task = serializers.ChoiceField(choices=paths, help_text=task_help)
    else:
        task = serializers.RegexField(
            TASK_PATH.pattern, max_length=MAX_TASK_PATH_CHARS, help_text=task_help
        )
    fields = {
        "task": task,
        "args": serializers.ListField(
            child=serializers.JSONField(),
            required=False,
            help_text="positional arguments (JSON); they must fit the function's signature",
        ),
        "kwargs": serializers.DictField(
            child=serializers.JSONField(), required=False, help_text="keyword arguments (JSON)"
        ),
    }
    return type("TaskPayload", (serializers.Serializer,), fields)


class TaskKind(JobKind):
    name = JobType.TASK.value
    form_label = "Python task"
    shows_result = True

    @property
    def payload_schema(self) -> type[serializers.Serializer]:
        return _task_payload_schema()

    def max_timeout_seconds(self) -> int:
        # A function holds its slot until it returns (§17): capped apart from steps.
        return settings.JOBWEAVER_MAX_TASK_TIMEOUT_SECONDS

    def parse_payload(self, payload: Any) -> dict:
        task = validate_task_payload(payload)
        # The task's declared policy applies to every job of it, however submitted (§13a).
        return {"steps": [], "task": task, **declared_policy(registry_get(task["task"]))}

    def total_steps(self, job: Job, latest: ExecutionAttempt | None) -> int:
        # A task reports its own progress (context.report_progress).
        return latest.total_steps if latest else 0

    def attempt_detail(self, attempt: ExecutionAttempt) -> dict:
        return {
            "exceptionType": attempt.exception_type or None,
            "traceback": attempt.traceback or None,
            "result": attempt.result,
        }

    def job_detail(self, execution: JobExecution, attempts: list[ExecutionAttempt]) -> dict:
        # The return value of the attempt that succeeded; null until the job COMPLETED.
        succeeded = [a for a in attempts if a.outcome == AttemptOutcome.SUCCESS]
        completed = execution.status == ExecutionStatus.COMPLETED and succeeded
        job = execution.job
        return {
            "result": succeeded[-1].result if completed else None,
            # The task's own options (ARCHITECTURE §13a); null: the settings' (§5).
            "retryPolicy": {
                "retryOn": job.retry_on,
                "retryBackoff": job.retry_backoff,
                "retryJitter": job.retry_jitter,
                "hardTimeoutSeconds": job.hard_timeout_seconds,
            },
        }

    def admin_result(self, job: Job) -> str:
        """The return value recorded with the job's successful attempt."""
        succeeded = job.attempts.filter(outcome=AttemptOutcome.SUCCESS).order_by("-attempt")
        attempt = succeeded.first()
        if attempt is None:
            return "-"
        return format_html("<pre>{}</pre>", json.dumps(attempt.result, indent=2))

    def form_fields(self) -> dict[str, forms.Field]:
        return {
            "task": forms.ChoiceField(
                required=False,
                choices=[("", "—"), *((path, path) for path in registered_paths())],
                help_text="TASK: one of the registered tasks (nothing else can run).",
            ),
            "args": forms.CharField(required=False, initial="[]", help_text="TASK: a JSON list."),
            "kwargs": forms.CharField(
                required=False, initial="{}", help_text="TASK: a JSON object."
            ),
        }

    def form_payload(self, data: dict, read_json: ReadJson) -> Any:
        return {
            "task": data["task"],
            "args": read_json(data["args"] or "[]", "args"),
            "kwargs": read_json(data["kwargs"] or "{}", "kwargs"),
        }

    def form_errors(self, data: dict) -> dict[str, str]:
        return {} if data.get("task") else {"task": "choose the task to run"}


TASK = TaskKind()
