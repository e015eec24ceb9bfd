"""Read-only admin for the transactional outbox: which domain events are still waiting (a
growing unpublished list means the relay or Kafka is down), and, with
JOBWEAVER_OUTBOX_KEEP_PUBLISHED, which were relayed to Kafka (by default the relay deletes a
row once Kafka confirmed it)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet

from jobweaver.core.admin_tools import ReadOnlyAdmin
from jobweaver.core.kafka import EVENT_TOPICS
from jobweaver.outbox.models import OutboxEvent

VIEW_ALL_JOBS = "jobweaver_jobs.view_all_jobs"


class TopicFilter(admin.SimpleListFilter):
    """The known event topics, without a SELECT DISTINCT over the whole outbox."""

    title = "topic"
    parameter_name = "topic"

    def lookups(self, request, model_admin):
        return [(topic, topic) for topic in EVENT_TOPICS]

    def queryset(self, request, queryset: QuerySet[OutboxEvent]) -> QuerySet[OutboxEvent]:
        return queryset.filter(topic=self.value()) if self.value() else queryset


class PublishedFilter(admin.SimpleListFilter):
    title = "published"
    parameter_name = "published"

    def lookups(self, request, model_admin):
        return [("yes", "Yes"), ("no", "No (waiting for the relay)")]

    def queryset(self, request, queryset: QuerySet[OutboxEvent]) -> QuerySet[OutboxEvent]:
        if self.value() == "yes":
            return queryset.filter(published_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(published_at__isnull=True)
        return queryset


@admin.register(OutboxEvent)
class OutboxEventAdmin(ReadOnlyAdmin):
    list_display = ["id", "topic", "key", "created_at", "published_at", "publish_attempts"]
    list_filter = [TopicFilter, PublishedFilter]
    # The key is the job id as text: an exact match finds every event of one job.
    search_fields = ["=key", "=trace_id"]
    search_help_text = "Exact key (job id) or trace id."
    show_full_result_count = False
    ordering = ["-created_at"]

    # Every tenant's events (payloads, errors): an operator's view only (§17).
    def has_view_permission(self, request, obj=None) -> bool:
        return super().has_view_permission(request, obj) and request.user.has_perm(VIEW_ALL_JOBS)

    def has_module_permission(self, request) -> bool:
        return super().has_module_permission(request) and request.user.has_perm(VIEW_ALL_JOBS)
