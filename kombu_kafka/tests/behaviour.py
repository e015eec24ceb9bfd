"""The transport's behaviour suite, written once and run against two backends.

`TransportBehaviour` is abstract (after Sentry arroyo's `tests/backends/mixins.py`): subclasses
provide the hooks — a kombu connection on the transport, raw produce, committed offsets, a rival
group member, reading a topic — and inherit every test. `kombu_kafka/tests/unit/` runs it over
the in-memory fake (milliseconds); `tests/integration/` runs the same tests on a real broker.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from abc import ABC, abstractmethod

from kombu import Connection, Queue

from kombu_kafka import RECORD_HEADERS_HEADER, confirm_deliveries
from kombu_kafka.poison import ERROR, ORIGINAL_OFFSET, ORIGINAL_PARTITION, ORIGINAL_TOPIC


def kombu_value(body, queue: str) -> bytes:
    """A record value exactly as kombu would publish `body` to `queue` (JSON, no encoding)."""
    return json.dumps(
        {
            "body": json.dumps(body),
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": {},
            "properties": {"delivery_info": {"exchange": "", "routing_key": queue}, "priority": 0},
        }
    ).encode()


class TransportBehaviour(ABC):
    #: How long a condition may take on this backend before the test fails.
    deadline_seconds = 30.0

    # --- hooks --------------------------------------------------------------------------------

    @abstractmethod
    def connection(self, **options) -> Connection:
        """A kombu Connection on our transport with these transport options added."""

    @abstractmethod
    def produce(self, topic: str, value: bytes, *, partition: int, key=None, headers=None):
        """Write one raw record, bypassing kombu, and wait until it is stored."""

    @abstractmethod
    def create_topic(self, topic: str, partitions: int) -> None: ...

    @abstractmethod
    def committed(self, group: str, topic: str, partition: int) -> int:
        """The group's committed offset (negative when none)."""

    @abstractmethod
    def rival(self, group: str, topic: str):
        """Another member of `group` subscribed to `topic`: has `poll()`, `partitions()`
        (what it owns), `receive_all()` (bodies it gets until the end) and `close()`."""

    @abstractmethod
    def read_topic(self, topic: str, count: int) -> list:
        """The first `count` records of a 1-partition topic (objects with value/key/headers)."""

    # --- helpers ------------------------------------------------------------------------------

    def names(self) -> tuple[str, str]:
        tag = uuid.uuid4().hex[:10]
        return f"kk-behaviour-{tag}", f"kk-group-{tag}"

    def wait(self, condition, what: str, conn: Connection | None = None, also=None) -> None:
        """Drive the connection (and `also`) until `condition()` holds, or fail at the deadline."""
        deadline = time.monotonic() + self.deadline_seconds
        while not condition():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            if also is not None:
                also()
            if conn is not None:
                with contextlib.suppress(TimeoutError):
                    conn.drain_events(timeout=0.05)

    def consume(self, conn: Connection, queue: str, prefetch: int):
        received: list = []
        consumer = conn.Consumer(
            Queue(queue, routing_key=queue),
            callbacks=[lambda body, message: received.append((body, message))],
            accept=["json"],
        )
        consumer.qos(prefetch_count=prefetch)
        consumer.consume()
        return consumer, received

    def publish(self, conn: Connection, queue: str, bodies: list) -> None:
        producer = conn.Producer()
        for body in bodies:
            producer.publish(
                body, routing_key=queue, exchange="", serializer="json", declare=[Queue(queue)]
            )
        confirm_deliveries(producer.channel)

    # --- tests --------------------------------------------------------------------------------

    def test_out_of_order_acks_commit_only_the_contiguous_prefix(self):
        queue, group = self.names()
        with self.connection(group_id=group) as conn:
            self.publish(conn, queue, ["m1", "m2", "m3"])
            consumer, received = self.consume(conn, queue, prefetch=3)
            self.wait(lambda: len(received) == 3, "3 deliveries", conn)
            assert [body for body, _ in received] == ["m1", "m2", "m3"]
            offsets = [message.kafka_offset for _, message in received]
            received[2][1].ack()
            received[0][1].ack()
            consumer.channel.commit_now()
            # m2 is unfinished, so m3 must not be covered.
            assert self.committed(group, queue, 0) == offsets[0] + 1
            received[1][1].ack()
            consumer.channel.commit_now()
            assert self.committed(group, queue, 0) == offsets[2] + 1

    def test_reject_requeues_or_drops_and_both_count_as_done(self):
        queue, group = self.names()
        with self.connection(group_id=group) as conn:
            self.publish(conn, queue, ["requeue-me", "drop-me"])
            consumer, received = self.consume(conn, queue, prefetch=1)
            self.wait(lambda: len(received) == 1, "first delivery", conn)
            received[0][1].reject(requeue=True)
            self.wait(lambda: len(received) == 2, "second delivery", conn)
            received[1][1].reject(requeue=False)
            self.wait(lambda: len(received) == 3, "the requeued copy", conn)
            received[2][1].ack()
            self.publish(conn, queue, ["sentinel"])
            self.wait(lambda: len(received) == 4, "the sentinel", conn)
            received[3][1].ack()
            assert [body for body, _ in received] == [
                "requeue-me",
                "drop-me",
                "requeue-me",
                "sentinel",
            ]
            consumer.channel.commit_now()
        # Two originals, the requeued copy, the sentinel: all four offsets are done.
        assert self.committed(group, queue, 0) == 4

    def held(self, channel) -> int:
        return channel.tracker.in_flight()

    def test_buffer_is_bounded_by_the_prefetch_count_and_pauses(self):
        queue, group = self.names()
        with self.connection(group_id=group) as conn:
            self.publish(conn, queue, [f"m{i}" for i in range(10)])
            consumer, received = self.consume(conn, queue, prefetch=2)
            channel = consumer.channel
            self.wait(lambda: self.held(channel) == 4, "2 delivered + 2 buffered", conn)
            for _ in range(10):  # keeps polling while full: holds no more, partitions paused
                with contextlib.suppress(TimeoutError):
                    conn.drain_events(timeout=0.05)
            assert (len(received), len(channel._buffer), self.held(channel)) == (2, 2, 4)
            assert channel._paused
            # Finishing work lets the rest in, in order, never holding more than the bound.
            while len(received) < 10:
                for _, message in received:
                    if not message.acknowledged:
                        message.ack()
                self.wait(
                    lambda: len(received) > 0 and not received[-1][1].acknowledged,
                    "next delivery",
                    conn,
                )
                assert self.held(channel) <= 4
            assert [body for body, _ in received] == [f"m{i}" for i in range(10)]

    def test_buffer_max_messages_overrides_the_bound(self):
        queue, group = self.names()
        with self.connection(group_id=group, buffer_max_messages=5) as conn:
            self.publish(conn, queue, [f"m{i}" for i in range(10)])
            consumer, _received = self.consume(conn, queue, prefetch=1)
            self.wait(lambda: self.held(consumer.channel) == 6, "1 delivered + 5 buffered", conn)
            for _ in range(10):
                with contextlib.suppress(TimeoutError):
                    conn.drain_events(timeout=0.05)
            assert self.held(consumer.channel) == 6

    def test_revoke_drops_buffered_records_and_commits_finished_ones(self):
        queue, group = self.names()
        self.create_topic(queue, partitions=2)
        for partition in (0, 1):
            for i in range(3):
                self.produce(queue, kombu_value(f"p{partition}-{i}", queue), partition=partition)
        with self.connection(group_id=group, buffer_max_messages=4) as conn:
            consumer, received = self.consume(conn, queue, prefetch=2)
            channel = consumer.channel
            self.wait(lambda: self.held(channel) == 6, "every record held", conn)
            for _, message in received:
                message.ack()
            finished = {
                message.kafka_partition: message.kafka_offset + 1 for _, message in received
            }
            rival = self.rival(group, queue)
            try:
                self.wait(
                    lambda: rival.partitions() and len(channel._consumer.assignment()) == 1,
                    "the rival to take a partition",
                    conn,
                    also=rival.poll,
                )
                [kept] = [tp.partition for tp in channel._consumer.assignment()]
                [lost] = rival.partitions()
                assert kept != lost
                # The revoked partition's finished work is committed, its buffer dropped ...
                expected = finished.get(lost)
                if expected is None:
                    assert self.committed(group, queue, lost) < 0
                else:
                    assert self.committed(group, queue, lost) == expected
                assert all(p["kafka_partition"] == kept for p in channel._buffer)
                # ... and the rival gets exactly what was not finished there.
                assert rival.receive_all(3 - max(expected or 0, 0)) == [
                    f"p{lost}-{i}" for i in range(expected or 0, 3)
                ]
            finally:
                rival.close()
            # This consumer still delivers the rest of the partition it kept.
            bodies_kept = [f"p{kept}-{i}" for i in range(3)]

            def all_kept():
                for _, message in received:
                    if not message.acknowledged:
                        message.ack()
                return set(bodies_kept) <= {body for body, _ in received}

            self.wait(all_kept, "the kept partition's records", conn)

    def test_poison_records_are_parked_and_passed(self):
        queue, group = self.names()
        self.create_topic(queue, partitions=1)
        self.produce(queue, b"\xffnot json", partition=0, key=b"k1", headers=[("h", b"1")])
        self.produce(queue, b'{"no": "properties"}', partition=0, key=b"k2")
        self.produce(queue, kombu_value("good", queue), partition=0)
        with self.connection(group_id=group) as conn:
            consumer, received = self.consume(conn, queue, prefetch=1)
            self.wait(lambda: len(received) == 1, "the good record", conn)
            assert received[0][0] == "good"
            received[0][1].ack()
            consumer.channel.commit_now()
        assert self.committed(group, queue, 0) == 3
        parked = self.read_topic(f"{queue}.parked", 2)
        assert [(r.value(), r.key()) for r in parked] == [
            (b"\xffnot json", b"k1"),
            (b'{"no": "properties"}', b"k2"),
        ]
        headers = dict(parked[0].headers())
        assert headers["h"] == b"1"
        assert headers[ORIGINAL_TOPIC] == queue.encode()
        assert headers[ORIGINAL_PARTITION] == b"0"
        assert headers[ORIGINAL_OFFSET] == b"0"
        assert b"not JSON" in headers[ERROR]
        assert dict(parked[1].headers())[ORIGINAL_OFFSET] == b"1"

    def test_parked_topic_option_names_the_topic(self):
        queue, group = self.names()
        self.create_topic(queue, partitions=1)
        self.produce(queue, b"[1, 2]", partition=0)
        self.produce(queue, kombu_value("good", queue), partition=0)
        with self.connection(group_id=group, parked_topic=f"{queue}-elsewhere") as conn:
            _consumer, received = self.consume(conn, queue, prefetch=1)
            self.wait(lambda: len(received) == 1, "the good record", conn)
        assert [r.value() for r in self.read_topic(f"{queue}-elsewhere", 1)] == [b"[1, 2]"]

    def test_basic_get_returns_tracked_messages_then_none(self):
        queue, group = self.names()
        with self.connection(group_id=group) as conn:
            self.publish(conn, queue, ["one", "two"])
            channel = conn.default_channel
            first = channel.basic_get(queue)
            assert first.decode() == "one"
            first.reject(requeue=True)
            second = channel.basic_get(queue)
            assert second.decode() == "two"
            second.ack()
            again = channel.basic_get(queue)
            assert again.decode() == "one"
            again.ack()
            assert channel.basic_get(queue) is None
            channel.commit_now()
        assert self.committed(group, queue, 0) == 3

    def test_record_headers_header_becomes_the_records_own_headers(self):
        queue, _group = self.names()
        self.create_topic(queue, partitions=1)
        with self.connection() as conn:
            producer = conn.Producer()
            producer.publish(
                "traced",
                routing_key=queue,
                exchange="",
                serializer="json",
                declare=[Queue(queue)],
                headers={RECORD_HEADERS_HEADER: {"traceId": "trace-1", "attempt": 2}},
            )
            producer.publish("plain", routing_key=queue, exchange="", serializer="json")
            confirm_deliveries(producer.channel)
        traced, plain = self.read_topic(queue, 2)
        assert dict(traced.headers()) == {"traceId": b"trace-1", "attempt": b"2"}
        assert not plain.headers()
