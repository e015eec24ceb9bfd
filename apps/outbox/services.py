"""Writing domain events to the outbox and relaying them to Kafka.

`outbox_enqueue` must be called inside the transaction that makes the state change; the event is
relayed right after that transaction commits, and `outbox_relay_pending` (on the beat schedule)
publishes anything left behind (a crash between commit and publish, Kafka down). Delivery is
at-least-once: consumers de-duplicate by the `eventId` header.
"""

from __future__ import annotations

import json
import logging
import uuid

from confluent_kafka import KafkaException
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.core.kafka import event_producer, topic_name
from apps.outbox.models import OutboxEvent

logger = logging.getLogger(__name__)

RELAY_BATCH_SIZE = 500
PUBLISH_TIMEOUT_SECONDS = 10.0


def outbox_enqueue(*, topic: str, key: str, payload: dict, trace_id: str = "") -> OutboxEvent:
    """Record an event in the current transaction and relay it once the transaction commits."""
    event = OutboxEvent.objects.create(topic=topic, key=key, payload=payload, trace_id=trace_id)
    transaction.on_commit(lambda: _relay_after_commit(event.id))
    return event


def outbox_enqueue_many(*, topic: str, events: list[tuple[str, dict, str]]) -> int:
    """`outbox_enqueue` for many events of one topic, given as (key, payload, trace id): one
    INSERT in the current transaction, relayed after commit. Returns how many were recorded."""
    rows = OutboxEvent.objects.bulk_create(
        OutboxEvent(topic=topic, key=key, payload=payload, trace_id=trace_id)
        for key, payload, trace_id in events
    )
    ids = [row.id for row in rows]

    def relay() -> None:
        for start in range(0, len(ids), RELAY_BATCH_SIZE):
            try:
                outbox_relay_pending(event_ids=ids[start : start + RELAY_BATCH_SIZE])
            except KafkaException as exc:
                logger.warning("batch relay after commit failed (periodic relay retries): %s", exc)
                return

    transaction.on_commit(relay)
    return len(ids)


def _relay_after_commit(event_id: uuid.UUID) -> None:
    try:
        outbox_relay_pending(event_ids=[event_id])
    except KafkaException as exc:
        # The periodic relay picks it up; the state change itself has committed.
        logger.warning("outbox relay after commit failed, left for the periodic relay: %s", exc)


def outbox_relay_pending(*, event_ids: list[uuid.UUID] | None = None) -> int:
    """Publish unpublished events (all, or the given ones); returns how many were published.

    Rows are claimed with FOR UPDATE SKIP LOCKED, so concurrent relays never publish the same
    row at the same time; a row is marked published only after the broker confirmed it.
    """
    published = 0
    while True:
        count = _relay_batch(event_ids)
        published += count
        if event_ids is not None or count < RELAY_BATCH_SIZE:
            return published


@transaction.atomic
def _relay_batch(event_ids: list[uuid.UUID] | None) -> int:
    rows = OutboxEvent.objects.select_for_update(skip_locked=True).filter(published_at=None)
    if event_ids is not None:
        rows = rows.filter(id__in=event_ids)
    events = list(rows.order_by("created_at")[:RELAY_BATCH_SIZE])
    if not events:
        return 0
    producer = event_producer()
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))

    for event in events:
        producer.produce(
            topic_name(event.topic),
            key=event.key.encode(),
            value=json.dumps(event.payload).encode(),
            headers={"eventId": str(event.id), "traceId": event.trace_id},
            on_delivery=on_delivery,
        )
    remaining = producer.flush(PUBLISH_TIMEOUT_SECONDS)
    ids = [event.id for event in events]
    if remaining or errors:
        # Left unpublished for the next relay; a consumer may see some of them twice.
        OutboxEvent.objects.filter(id__in=ids).update(publish_attempts=F("publish_attempts") + 1)
        logger.warning(
            "outbox publish incomplete: %d unconfirmed, errors: %s", remaining, errors[:3]
        )
        return 0
    OutboxEvent.objects.filter(id__in=ids).update(published_at=timezone.now())
    return len(events)
