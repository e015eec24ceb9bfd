"""Read-only admin for job executions: the scheduler's state of every job.

Operators act on jobs from the Job admin (Retry, Cancel); this list answers "what is due, what
is running, whose lease is about to expire".
"""

from __future__ import annotations

from django.contrib import admin

from apps.core.admin_tools import ExactSearchMixin, ReadOnlyAdmin
from apps.scheduler.models import JobExecution


@admin.register(JobExecution)
class JobExecutionAdmin(ExactSearchMixin, ReadOnlyAdmin):
    list_display = [
        "job",
        "status",
        "priority",
        "retries",
        "attempt_count",
        "next_run_at",
        "lease_expires_at",
        "updated_at",
    ]
    list_filter = ["status", "cancel_requested"]
    list_select_related = ["job"]
    search_fields = ["job__id", "job__trace_id"]
    search_help_text = "Exact job id or trace id."
    exact_uuid_fields = ("job_id",)
    exact_trace_field = "job__trace_id"
    show_full_result_count = False
    ordering = ["-updated_at"]

    @admin.display(description="retries used")
    def retries(self, execution: JobExecution) -> str:
        return f"{execution.retry_count} / {execution.max_retries}"
