"""Read-only admin for execution attempts: every delivery of every job, kept as history."""

from __future__ import annotations

import uuid

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest

from apps.executor.models import ExecutionAttempt


@admin.register(ExecutionAttempt)
class ExecutionAttemptAdmin(admin.ModelAdmin):
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
    show_full_result_count = False
    ordering = ["-started_at"]
    fieldsets = [
        (None, {"fields": ["event_id", "job", "attempt", "trace_id", "worker_id", "outcome"]}),
        ("Progress", {"fields": ["started_at", "finished_at", "progress", "error_message"]}),
        ("Log", {"fields": ["log_lines"]}),
    ]
    readonly_fields = ["progress"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="steps")
    def progress(self, attempt: ExecutionAttempt) -> str:
        return f"{attempt.steps_completed} / {attempt.total_steps}"

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[ExecutionAttempt], search_term: str
    ) -> tuple[QuerySet[ExecutionAttempt], bool]:
        """Exact ids on indexed columns, not a substring scan. A UUID-shaped term may also be a
        trace id (the default trace id is a UUID's hex)."""
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            value = uuid.UUID(term)
        except ValueError:
            return queryset.filter(trace_id=term), False
        return queryset.filter(Q(job_id=value) | Q(event_id=value) | Q(trace_id=term)), False
