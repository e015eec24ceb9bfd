"""Read-only admin for job executions: the scheduler's state of every job.

Operators act on jobs from the Job admin (Retry, Cancel); this list answers "what is due, what
is running, whose lease is about to expire".
"""

from __future__ import annotations

import uuid

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from apps.scheduler.models import JobExecution


@admin.register(JobExecution)
class JobExecutionAdmin(admin.ModelAdmin):
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
    show_full_result_count = False
    ordering = ["-updated_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="retries used")
    def retries(self, execution: JobExecution) -> str:
        return f"{execution.retry_count} / {execution.max_retries}"

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[JobExecution], search_term: str
    ) -> tuple[QuerySet[JobExecution], bool]:
        """Exact matches on indexed columns, not a substring scan. A UUID-shaped term may also
        be a trace id (the default trace id is a UUID's hex)."""
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            job_id = uuid.UUID(term)
        except ValueError:
            return queryset.filter(job__trace_id=term), False
        return queryset.filter(Q(job_id=job_id) | Q(job__trace_id=term)), False
