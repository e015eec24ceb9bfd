"""Read-only admin for execution attempts: every delivery of every job, kept as history."""

from __future__ import annotations

from django.contrib import admin

from jobweaver.core.admin_tools import ExactSearchMixin, ReadOnlyAdmin
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.selectors import owned_by


@admin.register(ExecutionAttempt)
class ExecutionAttemptAdmin(ExactSearchMixin, ReadOnlyAdmin):
    list_display = [
        "event_id",
        "job",
        "attempt",
        "outcome",
        "worker_id",
        "started_at",
        "finished_at",
        "progress",
    ]
    list_filter = ["outcome"]
    list_select_related = ["job"]
    search_fields = ["job__id", "event_id", "trace_id"]
    search_help_text = "Exact job id, event id or trace id."
    exact_uuid_fields = ("job_id", "event_id")
    show_full_result_count = False
    ordering = ["-started_at"]
    fieldsets = [
        (None, {"fields": ["event_id", "job", "attempt", "trace_id", "worker_id", "outcome"]}),
        ("Progress", {"fields": ["started_at", "finished_at", "progress", "error_message"]}),
        ("Log", {"fields": ["log_lines"]}),
        # A Python task's attempt (ARCHITECTURE §13): its return value, or its exception.
        ("Task", {"fields": ["result", "exception_type", "traceback"]}),
    ]
    readonly_fields = ["progress"]

    def get_queryset(self, request):
        """The attempts of one's own jobs, or everyone's with jobs.view_all_jobs (§17)."""
        return owned_by(super().get_queryset(request), request.user, owner="job__submitted_by")

    @admin.display(description="steps")
    def progress(self, attempt: ExecutionAttempt) -> str:
        return f"{attempt.steps_completed} / {attempt.total_steps}"
