"""The outbox relay against the real PostgreSQL and the real Kafka broker (database tests, not
unit tests): an event exists iff its transaction committed, it reaches its prefixed topic with
its key and headers, its row goes once Kafka confirmed it (or stays, marked published, with
JOBWEAVER_OUTBOX_KEEP_PUBLISHED), a broker outage leaves it for a later relay, and two relays
running at once never publish a row twice (FOR UPDATE SKIP LOCKED)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from jobweaver.core import kafka
from jobweaver.core.kafka import (
    JOB_COMPLETED,
    JOB_CREATED,
    JOB_FAILED,
    common_config,
    ensure_topics,
    topic_name,
)
from jobweaver.engine.mover import events_written
from jobweaver.engine.store.events import event_insert
from jobweaver.outbox import services
from jobweaver.outbox.models import OutboxEvent
from jobweaver.outbox.services import outbox_relay_pending

pytestmark = pytest.mark.django_db(transaction=True)  # commits are what these tests are about

READ_TIMEOUT_SECONDS = 30.0


@pytest.fixture
def deleting(settings):
    """The default: a published row is deleted (the test settings keep them, for the tests
    that read events from the outbox)."""
    settings.JOBWEAVER_OUTBOX_KEEP_PUBLISHED = False


def wait_until_gone(ids) -> None:
    """Until the relay's transaction that deleted these rows committed (it commits after the
    broker confirmed them, so a consumer may read them a moment before)."""
    deadline = time.monotonic() + READ_TIMEOUT_SECONDS
    while OutboxEvent.objects.filter(id__in=ids).exists():
        assert time.monotonic() < deadline, "the relay did not delete its published rows"
        time.sleep(0.05)


def outbox_enqueue(**event) -> OutboxEvent:
    """An event written as the engine writes one: its row, and the relay told after commit."""
    written = event_insert(**event)
    events_written()
    return written


@pytest.fixture(scope="session")
def event_topics():
    """The session's prefixed topics, removed at the end of the session (whichever of this and
    the integration `stack` fixture ends last finds nothing left to remove)."""
    ensure_topics()
    yield
    prefix = settings.JOBWEAVER_KAFKA_TOPIC_PREFIX
    admin = AdminClient(common_config())
    ours = [name for name in admin.list_topics(timeout=10).topics if name.startswith(prefix)]
    if prefix and ours:
        for future in admin.delete_topics(ours, operation_timeout=10).values():
            try:
                future.result(timeout=15)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise


@pytest.fixture(autouse=True)
def _topics(event_topics):
    pass


def read_events(topic: str, *, expected, watched=()) -> dict[str, list]:
    """The messages of the prefixed `topic`, read from its beginning, whose eventId header is in
    `expected` or `watched`, grouped by event id. Reads until every expected event has arrived
    and every partition's end is reached (so a duplicate already in the log is seen too)."""
    wanted = {str(event_id) for event_id in expected}
    interesting = wanted | {str(event_id) for event_id in watched}
    name = topic_name(topic)
    consumer = Consumer(
        {
            **common_config(),
            "group.id": f"test-outbox-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        partitions = set(consumer.list_topics(name, timeout=10).topics[name].partitions)
        consumer.assign([TopicPartition(name, p, OFFSET_BEGINNING) for p in partitions])
        seen: dict[str, list] = defaultdict(list)
        at_end: set[int] = set()
        deadline = time.monotonic() + READ_TIMEOUT_SECONDS
        while not (wanted <= set(seen) and at_end == partitions):
            if time.monotonic() > deadline:
                missing = sorted(wanted - set(seen))
                raise AssertionError(f"events {missing} did not reach {name} in time")
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                raise KafkaException(message.error())
            at_end.discard(message.partition())
            event_id = dict(message.headers() or []).get("eventId", b"").decode()
            if event_id in interesting:
                seen[event_id].append(message)
        return seen
    finally:
        consumer.close()


def headers_of(message) -> dict[str, str]:
    return {key: value.decode() for key, value in message.headers()}


def test_an_event_committed_with_its_change_is_published_with_key_and_headers(deleting):
    key = str(uuid.uuid4())
    payload = {"jobId": key, "traceId": "trace-relay-1", "status": "PENDING"}

    with transaction.atomic():
        event = outbox_enqueue(
            topic=JOB_CREATED, key=key, payload=payload, trace_id="trace-relay-1"
        )
        assert OutboxEvent.objects.get(id=event.id).published_at is None  # not before the commit

    [message] = read_events(JOB_CREATED, expected=[event.id])[str(event.id)]
    assert message.topic() == f"{settings.JOBWEAVER_KAFKA_TOPIC_PREFIX}{JOB_CREATED}"
    assert message.key() == key.encode()
    assert json.loads(message.value()) == payload
    assert headers_of(message) == {"eventId": str(event.id), "traceId": "trace-relay-1"}
    wait_until_gone([event.id])


def test_with_keep_published_a_relayed_row_stays_marked_published(settings):
    settings.JOBWEAVER_OUTBOX_KEEP_PUBLISHED = True
    key = str(uuid.uuid4())
    with transaction.atomic():
        event = outbox_enqueue(topic=JOB_CREATED, key=key, payload={"jobId": key})

    [message] = read_events(JOB_CREATED, expected=[event.id])[str(event.id)]
    assert json.loads(message.value()) == {"jobId": key}
    deadline = time.monotonic() + READ_TIMEOUT_SECONDS
    while (stored := OutboxEvent.objects.get(id=event.id)).published_at is None:
        assert time.monotonic() < deadline, "the relay did not mark its published row"
        time.sleep(0.05)
    assert stored.published_at >= stored.created_at
    assert stored.publish_attempts == 0
    assert outbox_relay_pending() == 0  # a marked row is not published again


def test_a_rolled_back_transaction_leaves_no_event(deleting):
    key = str(uuid.uuid4())  # both events share a key, so a partition: order is kept

    with pytest.raises(RuntimeError), transaction.atomic():
        rolled_back = outbox_enqueue(topic=JOB_COMPLETED, key=key, payload={"n": 1})
        raise RuntimeError("the state change fails")
    with transaction.atomic():
        marker = outbox_enqueue(topic=JOB_COMPLETED, key=key, payload={"n": 2})

    assert not OutboxEvent.objects.filter(id=rolled_back.id).exists()
    wait_until_gone([marker.id])  # relayed after commit
    assert outbox_relay_pending() == 0  # nothing left behind to relay either
    seen = read_events(JOB_COMPLETED, expected=[marker.id], watched=[rolled_back.id])
    assert str(rolled_back.id) not in seen


def test_events_of_a_key_are_relayed_in_the_order_written_whatever_the_writers_clocks(
    monkeypatch,
):
    """Two events of one job written by processes on different hosts (the first one's clock an
    hour ahead), both still waiting when a relay runs (Kafka was away, a relay lagged): the
    relay publishes in the order of the event times, so those come from the database's clock,
    not the writer's."""
    monkeypatch.setattr(services, "relay_soon", lambda: None)  # both wait for the relay below
    key = str(uuid.uuid4())
    ahead = timezone.now() + timedelta(hours=1)
    with monkeypatch.context() as host_ahead, transaction.atomic():
        host_ahead.setattr(timezone, "now", lambda: ahead)
        first = outbox_enqueue(topic=JOB_FAILED, key=key, payload={"attempt": 1})
    with transaction.atomic():
        second = outbox_enqueue(topic=JOB_FAILED, key=key, payload={"attempt": 2})
    assert first.created_at < second.created_at < ahead  # read back from the database

    assert outbox_relay_pending() >= 2
    seen = read_events(JOB_FAILED, expected=[first.id, second.id])
    (first_message,), (second_message,) = seen[str(first.id)], seen[str(second.id)]
    assert first_message.partition() == second_message.partition()  # one key, one partition
    assert first_message.offset() < second_message.offset()


@pytest.fixture
def broker(settings, monkeypatch):
    """Switch the relay between an unreachable broker and the real one. The cached producer
    is dropped on each switch (and the test's own one restored afterwards)."""
    monkeypatch.setattr(services, "PUBLISH_TIMEOUT_SECONDS", 1.0)  # shrink the wait for acks
    real = settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS

    def switch(*, reachable: bool) -> None:
        settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS = real if reachable else "127.0.0.1:1"
        monkeypatch.setattr(kafka, "_producer", None)

    return switch


def test_events_left_by_a_broker_outage_are_published_by_a_later_relay(broker, deleting):
    broker(reachable=False)
    key = str(uuid.uuid4())
    with transaction.atomic():  # the relay woken by this commit fails: attempt 1
        events = [outbox_enqueue(topic=JOB_CREATED, key=key, payload={"n": n}) for n in range(3)]
    ids = [event.id for event in events]
    deadline = time.monotonic() + READ_TIMEOUT_SECONDS
    while OutboxEvent.objects.filter(id__in=ids, publish_attempts=1).count() < 3:
        assert time.monotonic() < deadline, "the relay after commit made no attempt"
        time.sleep(0.05)

    assert outbox_relay_pending() == 0  # the periodic relay fails too: attempt 2

    rows = OutboxEvent.objects.filter(id__in=ids)
    assert [(row.published_at, row.publish_attempts) for row in rows] == [(None, 2)] * 3

    broker(reachable=True)
    assert outbox_relay_pending() == 3

    assert not OutboxEvent.objects.filter(id__in=ids).exists()  # this relay's own transaction
    seen = read_events(JOB_CREATED, expected=ids)
    assert sorted(json.loads(seen[str(i)][0].value())["n"] for i in ids) == [0, 1, 2]
    assert [len(seen[str(i)]) for i in ids] == [1, 1, 1]


def test_two_relays_at_once_never_publish_the_same_row_twice(monkeypatch, deleting):
    monkeypatch.setattr(services, "RELAY_BATCH_SIZE", 10)  # many batches, so the relays interleave
    with transaction.atomic():  # rows without the after-commit relay: both relays find them
        events = OutboxEvent.objects.bulk_create(
            OutboxEvent(topic=JOB_CREATED, key=str(uuid.uuid4()), payload={"n": n})
            for n in range(200)
        )
    ids = [event.id for event in events]
    start = threading.Barrier(2)

    def relay() -> int:
        try:
            start.wait(timeout=10)
            return outbox_relay_pending()
        finally:
            connection.close()  # each thread has its own connection

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(relay) for _ in range(2)]
        published = [future.result(timeout=60) for future in futures]  # re-raises their errors

    assert sum(published) == 200
    assert not OutboxEvent.objects.filter(id__in=ids).exists()
    seen = read_events(JOB_CREATED, expected=ids)
    duplicated = {
        event_id: len(messages) for event_id, messages in seen.items() if len(messages) > 1
    }
    assert duplicated == {}
