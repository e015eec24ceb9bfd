"""Transactional outbox: a domain event row is written in the same transaction as the state
change it reports, then relayed to Kafka. An event exists iff its state change committed."""

import uuid

from django.db import models
from django.db.models.functions import Now


class OutboxEvent(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)  # = eventId
    topic = models.CharField(max_length=100, help_text="logical topic, without the prefix")
    key = models.CharField(max_length=100)
    payload = models.JSONField()
    trace_id = models.CharField(max_length=64, blank=True, default="")
    # The database's clock, like every time the lifecycle writes: the relay publishes in this
    # order, and events of one job written by processes on different hosts (the submission's
    # by the web, the ending's by an executor) must not swap places over a skewed clock.
    created_at = models.DateTimeField(db_default=Now())
    published_at = models.DateTimeField(null=True, blank=True)
    publish_attempts = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(
                "created_at",
                name="jw_outbox_unpublished",
                condition=models.Q(published_at__isnull=True),
            ),
            # Retention: a pruned job's events (by key), and published rows oldest first.
            models.Index("key", name="jw_outbox_key"),
            models.Index(
                "published_at",
                name="jw_outbox_published",
                condition=models.Q(published_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.topic} {self.key} {self.id}"
