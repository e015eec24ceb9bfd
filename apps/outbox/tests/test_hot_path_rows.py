"""apps/core/db.py's compile-free `insert_row` and `update_rows` write what the ORM writes: the
same columns, the same prepared values (JSON, times, defaults, choices), read back by the ORM."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from jobweaver.core.db import DatabaseNow, insert_row, update_rows
from jobweaver.outbox.models import OutboxEvent

pytestmark = pytest.mark.django_db


def test_insert_row_stores_what_save_would():
    payload = {"jobId": str(uuid.uuid4()), "nested": [1, "two", {"three": None}], "é": "ü"}
    event = OutboxEvent(topic="job.completed", key="k", payload=payload, trace_id="t-1")
    insert_row(event)

    stored = OutboxEvent.objects.get(pk=event.pk)
    assert (stored.topic, stored.key, stored.payload, stored.trace_id) == (
        "job.completed",
        "k",
        payload,
        "t-1",
    )
    assert stored.created_at == event.created_at  # the database's default, read back as save() does
    assert (stored.published_at, stored.publish_attempts) == (None, 0)  # defaults
    assert not event._state.adding


def test_update_rows_matches_only_its_filter_and_takes_the_database_clock():
    first, second = (OutboxEvent(topic="t", key=k, payload={}) for k in ("a", "b"))
    for event in (first, second):
        insert_row(event)
    before = datetime.now(UTC)

    updated = update_rows(
        OutboxEvent,
        where={"id": first.pk, "key": "a"},
        values={"published_at": DatabaseNow(), "payload": {"done": True}, "publish_attempts": 2},
    )

    assert updated == 1
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.published_at >= before and first.payload == {"done": True}
    assert first.publish_attempts == 2
    assert (second.published_at, second.payload, second.publish_attempts) == (None, {}, 0)
    assert update_rows(OutboxEvent, where={"id": first.pk, "key": "b"}, values={"key": "x"}) == 0


def test_insert_row_refuses_a_row_without_its_primary_key():
    event = OutboxEvent(topic="t", key="k", payload={})
    event.pk = None
    with pytest.raises(AssertionError):
        insert_row(event)
