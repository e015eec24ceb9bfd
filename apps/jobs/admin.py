"""The operators' view of jobs: list, filter, find by id or trace id, inspect, retry, cancel.

Jobs are read-only here. They are created through the submission service (API, `manage.py
submit_job`) and move only through the scheduler's transitions, so the admin never edits a row:
its Retry and Cancel actions call the same services as the API.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from apps.core.admin_tools import ExactSearchMixin
from apps.core.errors import InvalidStateTransition, JobNotFound
from apps.core.timeutil import iso
from apps.executor.models import AttemptOutcome, ExecutionAttempt
from apps.jobs.models import Job, JobType
from apps.jobs.services import job_cancel, job_retry
from apps.scheduler.models import JobExecution

# Skipped jobs are listed by reason in the action's message; beyond this many, only counted.
MAX_SKIPPED_REASONS_SHOWN = 10


def utc_time(field_name: str, description: str) -> Callable[..., str]:
    """A read-only admin field showing a timestamp as the API does (UTC, milliseconds): the
    admin's default format drops the seconds that leases and backoff delays are measured in."""

    @admin.display(description=f"{description} (UTC)", ordering=field_name)
    def show(self, obj) -> str:
        return iso(getattr(obj, field_name)) or "-"

    return show


class ReadOnlyInline:
    """Inline rows are history and state owned by the scheduler and the executor: show only."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_readonly_fields(self, request, obj=None) -> list[str]:
        # All of them: a form field for a non-editable column (auto timestamps) is an error.
        return flatten_fieldsets(self.get_fieldsets(request, obj))


class ExecutionInline(ReadOnlyInline, admin.StackedInline):
    model = JobExecution
    verbose_name = "execution"
    verbose_name_plural = "execution"
    fieldsets = [
        (None, {"fields": ["status", "retries", "attempt_count", "next_run", "last_error"]}),
        ("Lease", {"fields": ["current_event_id", "lease_expires", "cancel_requested"]}),
        ("Timestamps", {"fields": ["dispatched", "started", "finished", "updated"]}),
    ]
    next_run = utc_time("next_run_at", "next run at")
    lease_expires = utc_time("lease_expires_at", "lease expires at")
    dispatched = utc_time("dispatched_at", "dispatched at")
    started = utc_time("started_at", "started at")
    finished = utc_time("finished_at", "finished at")
    updated = utc_time("updated_at", "updated at")

    @admin.display(description="retries used")
    def retries(self, execution: JobExecution) -> str:
        return f"{execution.retry_count} / {execution.max_retries}"


class AttemptInline(ReadOnlyInline, admin.TabularInline):
    model = ExecutionAttempt
    fields = [
        "attempt",
        "outcome",
        "worker_id",
        "started",
        "finished",
        "progress",
        "error_message",
        "exception_type",
    ]
    ordering = ["attempt"]
    started = utc_time("started_at", "started at")
    finished = utc_time("finished_at", "finished at")
    # The attempt's own page shows its event id, trace id and the lines its LOG steps wrote.
    show_change_link = True

    @admin.display(description="steps")
    def progress(self, attempt: ExecutionAttempt) -> str:
        return f"{attempt.steps_completed} / {attempt.total_steps}"


def _execution(job: Job) -> JobExecution | None:
    # Every job gets its execution in the submit transaction; stay readable if one is missing.
    return getattr(job, "execution", None)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


@admin.register(Job)
class JobAdmin(ExactSearchMixin, admin.ModelAdmin):
    list_display = [
        "id",
        "status",
        "job_type",
        "priority",
        "retries",
        "attempts",
        "created_at",
    ]
    list_filter = ["execution__status", "job_type"]
    list_select_related = ["execution"]
    # Search is exact (see get_search_results); the fields here only label the search box.
    search_fields = ["id", "trace_id"]
    search_help_text = "Exact job id or trace id."
    exact_uuid_fields = ("id",)
    # Counting every job on each page load is what makes big changelists slow.
    show_full_result_count = False
    actions = ["retry_jobs", "cancel_jobs"]
    fieldsets = [
        (None, {"fields": ["id", "job_type", "priority", "trace_id"]}),
        ("Limits", {"fields": ["max_retries", "timeout_seconds", "run_at"]}),
        ("What to run", {"fields": ["steps_json", "task_result", "queue_name", "task_priority"]}),
        ("Submission", {"fields": ["submitted_by", "idempotency_key", "created_at", "updated_at"]}),
    ]
    readonly_fields = ["steps_json", "task_result"]
    inlines = [ExecutionInline, AttemptInline]

    # --- read-only: jobs come from the submission service and change through the scheduler -----

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return False

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """Retrying and cancelling are what "change job" means for a row nobody edits."""
        return request.user.has_perm(f"{self.opts.app_label}.change_{self.opts.model_name}")

    # --- list columns -------------------------------------------------------------------------

    @admin.display(description="status", ordering="execution__status")
    def status(self, job: Job) -> str:
        execution = _execution(job)
        return execution.status if execution else "-"

    @admin.display(description="retries used")
    def retries(self, job: Job) -> str:
        execution = _execution(job)
        return f"{execution.retry_count} / {execution.max_retries}" if execution else "-"

    @admin.display(description="attempts", ordering="execution__attempt_count")
    def attempts(self, job: Job) -> int | str:
        execution = _execution(job)
        return execution.attempt_count if execution else "-"

    @admin.display(description="payload")
    def steps_json(self, job: Job) -> str:
        """A simulation's steps, or a Python task's {"task", "args", "kwargs"} (§13)."""
        shown = job.instruction if job.job_type == JobType.TASK else job.steps
        return format_html("<pre>{}</pre>", json.dumps(shown, indent=2, ensure_ascii=False))

    @admin.display(description="result")
    def task_result(self, job: Job) -> str:
        """A TASK job's return value, recorded with its successful attempt."""
        if job.job_type != JobType.TASK:
            return "-"
        succeeded = job.attempts.filter(outcome=AttemptOutcome.SUCCESS).order_by("-attempt")
        attempt = succeeded.first()
        if attempt is None:
            return "-"
        return format_html("<pre>{}</pre>", json.dumps(attempt.result, indent=2))

    # --- search -------------------------------------------------------------------------------

    # --- actions ------------------------------------------------------------------------------

    @admin.action(description="Retry selected FAILED or CANCELLED jobs", permissions=["operate"])
    def retry_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._apply_to_each(request, queryset, job_retry, done="Retried {jobs}.")

    @admin.action(description="Cancel selected jobs", permissions=["operate"])
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        self._apply_to_each(
            request,
            queryset,
            job_cancel,
            done="Cancelled {jobs}; a running job stops at its next checkpoint.",
        )

    def _apply_to_each(
        self,
        request: HttpRequest,
        queryset: QuerySet[Job],
        operation: Callable[..., None],
        *,
        done: str,
    ) -> None:
        """Run `operation(job_id=...)` per job, each in its own transaction, so one job in the
        wrong state skips only itself; then tell the operator what happened to every job.
        `done` is the success message, with `{jobs}` standing for "N job(s)"."""
        succeeded = 0
        skipped: list[str] = []
        for job_id in queryset.values_list("id", flat=True):
            try:
                operation(job_id=job_id)
            except (InvalidStateTransition, JobNotFound) as error:
                skipped.append(error.message)
            else:
                succeeded += 1
        if succeeded:
            self.message_user(
                request, done.format(jobs=_plural(succeeded, "job")), messages.SUCCESS
            )
        if skipped:
            reasons = skipped[:MAX_SKIPPED_REASONS_SHOWN]
            if len(skipped) > len(reasons):
                reasons.append(f"and {len(skipped) - len(reasons)} more")
            self.message_user(
                request,
                f"Skipped {_plural(len(skipped), 'job')}: {'; '.join(reasons)}",
                messages.WARNING,
            )
