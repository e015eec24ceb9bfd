"""Writing domain events to the outbox and relaying them to Kafka.

`outbox_enqueue` must be called inside the transaction that makes the state change. Once that
transaction commits, it wakes this process's relay thread, which publishes everything pending
in batches — off the request and task threads, so no request or attempt waits for Kafka — and
`outbox_relay_pending` on the beat schedule publishes anything left behind (a crash between
commit and publish, Kafka down). Each row is marked published by its own delivery report.
Delivery is at-least-once: consumers de-duplicate by the `eventId` header.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
import time

from django.db import connection, transaction

from apps.core.db import DATABASE_UNAVAILABLE, default_literal, insert_row
from apps.core.kafka import event_producer, topic_name
from apps.outbox.models import OutboxEvent

logger = logging.getLogger(__name__)

RELAY_BATCH_SIZE = 500
PUBLISH_TIMEOUT_SECONDS = 10.0


def outbox_enqueue(*, topic: str, key: str, payload: dict, trace_id: str = "") -> OutboxEvent:
    """Record an event in the current transaction; it is relayed once the transaction commits."""
    event = OutboxEvent(topic=topic, key=key, payload=payload, trace_id=trace_id)
    insert_row(event)  # on every transition's hot path: no SQL compile (apps/core/db.py)
    relay_after_commit()
    return event


def relay_after_commit() -> None:
    """Wake the relay once the current transaction commits (at once outside one)."""
    transaction.on_commit(relay_soon)


def outbox_enqueue_step(
    *, topic: str, key: str, payload: str, trace_id: str, from_sql: str, params: list
) -> tuple[str, list]:
    """`outbox_enqueue` as one step of a larger statement (lifecycle.execution_complete): an
    event whose key, payload (jsonb) and trace id are SQL expressions over `from_sql`, the rows
    of that statement it follows; `params` fill the payload's placeholders. The caller wakes
    the relay (`relay_after_commit`) once the statement went through."""
    return _insert_select(key, payload, trace_id, from_sql), [topic, *params]


@functools.lru_cache(maxsize=16)
def _insert_select(key: str, payload: str, trace_id: str, from_sql: str) -> str:
    """An INSERT … SELECT of events whose key, payload (jsonb) and trace id are SQL expressions
    over `from_sql`, built once per shape. Its parameters are the topic, then those of the
    expressions and `from_sql`, in that order. The event's id comes from the database (a new
    UUID), its time is the column's default (the database's clock), and the other fields'
    defaults are literals of the text: building a model instance and adapting its values per
    call was a tenth of the executor's own CPU, and per event of a batch most of the web's."""
    expressions = {
        "id": "gen_random_uuid()",
        "topic": "%s",
        "key": key,
        "payload": payload,
        "trace_id": trace_id,
    }
    qn = connection.ops.quote_name
    fields = [f for f in OutboxEvent._meta.concrete_fields if f.name != "created_at"]
    columns = ", ".join(qn(field.column) for field in fields)
    values = ", ".join(expressions.get(field.name) or default_literal(field) for field in fields)
    return f"INSERT INTO {qn(OutboxEvent._meta.db_table)} ({columns}) SELECT {values} {from_sql}"


def outbox_enqueue_many(*, topic: str, events: list[tuple[str, dict, str]]) -> int:
    """`outbox_enqueue` for many events of one topic, given as (key, payload, trace id): one
    INSERT … SELECT over one JSON document of them in the current transaction, one wake of the
    relay after commit. Returns the count.

    A bulk_create of a batch of a thousand compiled its eight thousand values one by one (54
    ms of the web process's CPU per batch; 93 ms once the event time became a database
    default); this statement has two parameters, whatever the batch's size (2.3 ms)."""
    if not events:
        return 0
    # One JSON document for the whole batch: as text arrays, the payloads' quotes were escaped
    # one by one by psycopg's array dumper (a regular expression per quote), half the cost.
    rows = [{"k": key, "p": payload, "t": trace_id} for key, payload, trace_id in events]
    with connection.cursor() as cursor:
        cursor.execute(_insert_select("e.k", "e.p", "e.t", _BATCH_ROWS), [topic, json.dumps(rows)])
        count = cursor.rowcount
    transaction.on_commit(relay_soon)
    return count


# The events of `outbox_enqueue_many`, one JSON document of {"k", "p", "t"} objects.
_BATCH_ROWS = "FROM jsonb_to_recordset(%s::jsonb) AS e(k text, p jsonb, t text)"


def outbox_relay_pending() -> int:
    """Publish every unpublished event; returns how many were confirmed by the broker.

    Rows are claimed with FOR UPDATE SKIP LOCKED, so concurrent relays never publish the same
    row at the same time; a row is marked published only after its own delivery report.
    """
    published = 0
    while True:
        confirmed, claimed = _relay_batch()
        published += confirmed
        if claimed < RELAY_BATCH_SIZE or confirmed < claimed:
            return published


@transaction.atomic
def _relay_batch() -> tuple[int, int]:
    """One batch: (confirmed, claimed). Plain SQL, as it runs after every few jobs: the payload
    is read as the JSON text PostgreSQL stores and sent as is (not decoded into Python and
    encoded again), and one fixed statement marks the rows, whatever their number (an `IN`
    list of each length was a statement of its own to parse and plan)."""
    table = OutboxEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, topic, key, payload::text, trace_id FROM {table} "
            "WHERE published_at IS NULL ORDER BY created_at LIMIT %s FOR UPDATE SKIP LOCKED",
            [RELAY_BATCH_SIZE],
        )
        events = cursor.fetchall()
    if not events:
        return 0, 0
    producer = event_producer()
    confirmed: list = []
    errors: list[str] = []

    def report(event_id):
        def on_delivery(err, msg):
            if err is None:
                confirmed.append(event_id)
            else:
                errors.append(str(err))

        return on_delivery

    for event_id, topic, key, payload, trace_id in events:
        producer.produce(
            topic_name(topic),
            key=key.encode(),
            value=payload.encode(),
            headers={"eventId": str(event_id), "traceId": trace_id},
            on_delivery=report(event_id),
        )
    producer.flush(PUBLISH_TIMEOUT_SECONDS)
    with connection.cursor() as cursor:
        if confirmed:
            cursor.execute(
                f"UPDATE {table} SET published_at = clock_timestamp() WHERE id = ANY(%s)",
                [confirmed],
            )
        delivered = set(confirmed)
        failed = [event_id for event_id, *_ in events if event_id not in delivered]
        if failed:
            # Left unpublished for the next relay; a consumer may see some of them twice.
            cursor.execute(
                f"UPDATE {table} SET publish_attempts = publish_attempts + 1 WHERE id = ANY(%s)",
                [failed],
            )
    if failed:
        logger.warning(
            "outbox publish incomplete: %d of %d unconfirmed, errors: %s",
            len(failed),
            len(events),
            errors[:3],
        )
    return len(confirmed), len(events)


# A relay thread without work this long closes its database session.
RELAY_IDLE_SECONDS = 5.0
# How long a woken relay thread waits for more commits before it relays (domain events only:
# no job waits for them).
RELAY_LINGER_SECONDS = 0.02


class _RelayThread(threading.Thread):
    """This process's relay: woken after each commit that wrote events; one relay run
    publishes everything pending, however many commits woke it."""

    def __init__(self):
        super().__init__(name="jobweaver-outbox-relay", daemon=True)
        self.wake = threading.Event()

    def run(self) -> None:
        while True:
            if not self.wake.wait(timeout=RELAY_IDLE_SECONDS):
                # Idle: hold no database session. While busy the session is kept: a new one
                # per relay run cost PostgreSQL a backend start for every few jobs.
                connection.close()
                self.wake.wait()
            # Linger a moment, like a Kafka producer: under load the commits of that moment
            # are relayed as one batch (one claim, one flush, one update), not one by one.
            time.sleep(RELAY_LINGER_SECONDS)
            self.wake.clear()
            try:
                outbox_relay_pending()
            except DATABASE_UNAVAILABLE as exc:
                logger.warning("outbox relay after commit failed, left for the beat relay: %s", exc)
                connection.close()
            except Exception:  # any broker error: the beat relay is the safety net
                logger.warning("outbox relay after commit failed", exc_info=True)
            try:
                connection.close_if_unusable_or_obsolete()  # broken, or older than CONN_MAX_AGE
            except Exception:  # the thread must outlive any one run, or relaying stops here
                logger.warning("outbox relay could not check its connection", exc_info=True)


_relay_lock = threading.Lock()
_relay: tuple[int, _RelayThread] | None = None


def relay_soon() -> None:
    """Wake this process's relay thread (started on first use, again after a fork)."""
    global _relay
    with _relay_lock:
        if _relay is None or _relay[0] != os.getpid():
            thread = _RelayThread()
            thread.start()
            _relay = (os.getpid(), thread)
        _relay[1].wake.set()
