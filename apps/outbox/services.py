"""Writing domain events to the outbox and relaying them to Kafka.

The engine writes a job's events in the transaction that makes its state change
(apps/engine/events.py). Once that transaction commits, the engine's `events_committed` signal
wakes this process's relay thread, which publishes everything pending
in batches — off the request and task threads, so no request or attempt waits for Kafka — and
`outbox_relay_pending` on the beat schedule publishes anything left behind (a crash between
commit and publish, Kafka down). A row is deleted once its own delivery report confirms it
(JOBWEAVER_OUTBOX_KEEP_PUBLISHED keeps it, marked published, for retention to prune): Kafka
holds the event from then on, and a marked row was a new row version with its index entries
for PostgreSQL to write on every event, then to prune (bench/NOTES.md). Delivery is
at-least-once: consumers de-duplicate by the `eventId` header.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from functools import partial

from django.db import connection, transaction

from jobweaver.conf import settings
from jobweaver.core.db import DATABASE_UNAVAILABLE
from jobweaver.core.kafka import event_producer, topic_name
from jobweaver.outbox.models import OutboxEvent

logger = logging.getLogger(__name__)

RELAY_BATCH_SIZE = 500
PUBLISH_TIMEOUT_SECONDS = 10.0


def relay_on_events_committed(sender=None, **kwargs) -> None:
    """The engine's `events_committed` receiver (connected in apps.py): wake the relay."""
    relay_soon()


def outbox_relay_pending() -> int:
    """Publish every unpublished event; returns how many were confirmed by the broker.

    Rows are claimed with FOR UPDATE SKIP LOCKED, so concurrent relays never publish the same
    row at the same time; a row is deleted (or marked published) only after its own delivery
    report.
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
    encoded again), and one fixed statement deletes or marks the rows, whatever their number
    (an `IN` list of each length was a statement of its own to parse and plan)."""
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

    def report(event_id, err, msg) -> None:  # the batch's one delivery callback
        if err is None:
            confirmed.append(event_id)
        else:
            errors.append(str(err))

    # Per event only what differs: the topic's full name is looked up once per topic, and the
    # callback is the batch's, bound to the event (a closure per event, and the settings
    # look-up behind `topic_name`, were most of the relay's own work per event).
    topics = {topic: topic_name(topic) for topic in {topic for _, topic, *_ in events}}
    for event_id, topic, key, payload, trace_id in events:
        producer.produce(
            topics[topic],
            key=key.encode(),
            value=payload.encode(),
            headers={"eventId": str(event_id), "traceId": trace_id},
            on_delivery=partial(report, event_id),
        )
    producer.flush(PUBLISH_TIMEOUT_SECONDS)
    with connection.cursor() as cursor:
        if confirmed and settings.JOBWEAVER_OUTBOX_KEEP_PUBLISHED:
            cursor.execute(
                f"UPDATE {table} SET published_at = clock_timestamp() WHERE id = ANY(%s)",
                [confirmed],
            )
        elif confirmed:
            cursor.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", [confirmed])
        failed = []
        if len(confirmed) < len(events):
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
# no job waits for them). A relay run costs about the same for 20 events as for 100 (its
# claim, flush and update), so under load a longer linger is less CPU a job (bench/NOTES.md).
RELAY_LINGER_SECONDS = 0.1


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
                # No `SELECT 1` before the next run's first statement (Django's health check,
                # which the call above re-arms): that statement finds a broken connection as
                # well, and its error closes it (above). As run_job does (executor/tasks.py).
                connection.health_check_done = True
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
