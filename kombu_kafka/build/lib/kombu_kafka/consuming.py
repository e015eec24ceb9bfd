"""The consuming half of the Kafka channel: one consumer per channel, rebalance callbacks,
offset commits over finished messages only, the bounded look-ahead buffer, poison parking, and
kombu's `drain_events` / `basic_get`.

A mixin of `kombu_kafka.transport.Channel`, split out to keep each module to one concern; it
relies on the channel for clients (`client_factory`, `common_config`, `tracker`), topics
(`_topic`, `_queue`, `_ensure_topic`) and producing (`_produce`, `confirm_deliveries`).
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections import deque
from queue import Empty

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kombu_kafka.clients import consumer_defaults
from kombu_kafka.poison import PoisonRecord, decode_payload, parked_headers

logger = logging.getLogger(__name__)


class ConsumingChannel:
    """Consumer side of `Channel` (see the module docstring)."""

    _consumer = None
    _consumer_group: str | None = None
    _subscribed: tuple[str, ...] = ()
    _paused = False
    # Delivery tags: this channel's prefix and a counter (`_accept`), made on first use.
    _tag_prefix = ""
    _delivery_tags = None

    def _ensure_consumer(self):
        self._check_pid()
        topics = tuple(sorted({self._topic(q) for q in (*self._active_queues, *self._get_queues)}))
        if self._consumer is None:
            self._consumer_group = self._group_id(topics)
            self._consumer = self.client_factory.consumer(
                {
                    **consumer_defaults(self._consumer_group),
                    **self.common_config,
                    **self.kafka_consumer_config,
                }
            )
        if topics != self._subscribed:
            for topic in topics:
                self._ensure_topic(topic)
            self._consumer.subscribe(
                list(topics),
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            self._subscribed = topics
            self._paused = False
        return self._consumer

    # --- rebalance callbacks (run inside consumer.poll, on the consumer's thread) -------------

    def _on_assign(self, consumer, partitions: list[TopicPartition]) -> None:
        self.tracker.assign([(tp.topic, tp.partition) for tp in partitions])
        if self._paused and partitions:
            # Newly assigned partitions start paused too while the buffer is full.
            consumer.incremental_assign(partitions)
            consumer.pause(partitions)
        logger.info("assigned %s", [(tp.topic, tp.partition) for tp in partitions])

    def _drop_buffered(self, partitions: list[TopicPartition]) -> None:
        # Their new owner reads them again from the last commit.
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._buffer = deque(
            p for p in self._buffer if (p["kafka_topic"], p["kafka_partition"]) not in gone
        )

    def _on_revoke(self, consumer, partitions: list[TopicPartition]) -> None:
        self._drop_buffered(partitions)
        final = self.tracker.revoke([(tp.topic, tp.partition) for tp in partitions])
        self._commit(final, asynchronous=False)
        logger.info("revoked %s", [(tp.topic, tp.partition) for tp in partitions])

    def _on_lost(self, consumer, partitions: list[TopicPartition]) -> None:
        # Ownership is already gone: committing would be refused. Drop the state.
        self._drop_buffered(partitions)
        self.tracker.revoke([(tp.topic, tp.partition) for tp in partitions])
        logger.warning("partitions lost %s", [(tp.topic, tp.partition) for tp in partitions])

    # --- commits ------------------------------------------------------------------------------

    def _commit(self, offsets: dict[tuple[str, int], int], *, asynchronous: bool) -> None:
        if not offsets or self._consumer is None:
            return
        try:
            self._consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                asynchronous=asynchronous,
            )
        except KafkaException as exc:
            # Not fatal: the messages stay uncommitted and are redelivered after a rebalance
            # (consumers fence duplicates). The next commit covers them.
            logger.warning("offset commit failed: %s", exc)
            return
        self.tracker.mark_committed(offsets)

    def commit_now(self) -> None:
        """Commit every contiguous finished offset (consumer thread only)."""
        self._commit(self.tracker.committable(), asynchronous=False)

    def message_done(self, message) -> None:
        """A delivered message finished (ack or reject): may be called from any thread."""
        if message.kafka_topic is not None:
            self.tracker.done(message.kafka_topic, message.kafka_partition, message.kafka_offset)

    # --- consuming ----------------------------------------------------------------------------

    def _buffer_bound(self) -> int:
        """How many records may wait here beyond those delivered.

        Every buffered record is work this process holds but cannot start yet, and its
        partition's later records wait behind it. Flow control (ARCHITECTURE §4a) keeps what an
        executor holds at its prefetch window, which Celery sets to the worker's concurrency
        (prefetch multiplier 1): so the buffer holds at most that many again, at least one
        record to hide the fetch latency. `buffer_max_messages` overrides it.
        """
        if self.buffer_max_messages is not None:
            return self.buffer_max_messages
        return max(1, self.qos.prefetch_count or 0)

    def _set_paused(self, consumer, paused: bool) -> None:
        if paused == self._paused:
            return
        assignment = consumer.assignment()
        if assignment:
            (consumer.pause if paused else consumer.resume)(assignment)
        self._paused = paused

    def _poll(self, consumer, timeout: float):
        """One record from Kafka, or None (nothing, or a consumer event that is not a record)."""
        record = consumer.poll(timeout)
        if record is None:
            return None
        if record.error() is not None:
            if record.error().code() != KafkaError._PARTITION_EOF:
                logger.warning("consumer error: %s", record.error())
            return None
        return record

    def _accept(self, record) -> dict | None:
        """Track a polled record as in flight and turn it into a kombu payload; a poison record
        is parked and counted done at once (None)."""
        if self._delivery_tags is None:
            self._tag_prefix, self._delivery_tags = f"{uuid.uuid4().hex}.", itertools.count(1)
        topic, partition, offset = record.topic(), record.partition(), record.offset()
        # Tracked at poll time, in partition order: the watermark can never pass a record that
        # is still buffered here.
        self.tracker.delivered(topic, partition, offset)
        try:
            payload = decode_payload(record.value())
            properties = payload["properties"]
            properties.setdefault("delivery_info", {})
            # A tag per delivery: the same message delivered twice must not share QoS state.
            # Tags need only be unique within this channel's QoS: a counter, not uuid4, whose
            # os.urandom is a system call that lets go of the interpreter's lock per message.
            properties["delivery_tag"] = f"{self._tag_prefix}{next(self._delivery_tags)}"
            self.Message(dict(payload), channel=self)  # what kombu will build must build
        except (PoisonRecord, KeyError, TypeError, ValueError) as exc:
            self._park(record, f"{type(exc).__name__}: {exc}")
            self.tracker.done(topic, partition, offset)
            return None
        payload["kafka_topic"] = topic
        payload["kafka_partition"] = partition
        payload["kafka_offset"] = offset
        return payload

    def _park(self, record, error: str) -> None:
        """Produce a poison record unchanged to the parked topic and confirm it; a failure to
        confirm propagates, so the record stays unfinished and is parked again on redelivery."""
        parked = self.parked_topic or f"{record.topic()}.parked"
        logger.error(
            "parking undecodable record %s[%d]@%d in %s: %s",
            record.topic(),
            record.partition(),
            record.offset(),
            parked,
            error,
        )
        self._ensure_topic(parked)
        self._produce(
            parked, record.value(), key=record.key(), headers=parked_headers(record, error)
        )
        self.confirm_deliveries()

    def _take_buffered(self, topics: set[str]) -> dict | None:
        for index, payload in enumerate(self._buffer):
            if payload["kafka_topic"] in topics:
                del self._buffer[index]
                return payload
        return None

    def drain_events(self, timeout=None, callback=None):
        """Deliver one message if the prefetch window allows, else keep polling into the
        bounded local buffer (so the consumer stays in its group); a full buffer pauses the
        partitions."""
        callback = callback or self.connection._deliver
        if not self._consumers or not self._active_queues:
            raise Empty()
        consumer = self._ensure_consumer()
        if self.tracker.should_commit():
            self.commit_now()
        active = {self._topic(q) for q in self._active_queues}
        if self.qos.can_consume():
            payload = self._take_buffered(active)
            if payload is None:
                self._set_paused(consumer, False)
                record = self._poll(consumer, self.poll_timeout_seconds)
                payload = self._accept(record) if record is not None else None
                if payload is not None and payload["kafka_topic"] not in active:
                    self._buffer.append(payload)  # kept for basic_get
                    payload = None
            if payload is None:
                raise Empty()
            callback(payload, self._queue(payload["kafka_topic"]))
            return
        full = len(self._buffer) >= self._buffer_bound()
        self._set_paused(consumer, full)
        record = self._poll(consumer, self.poll_timeout_seconds)
        if record is None:
            raise Empty()
        if full:
            # Fetched before the pause took effect: give it back untracked, Kafka keeps it.
            consumer.seek(TopicPartition(record.topic(), record.partition(), record.offset()))
        else:
            payload = self._accept(record)
            if payload is not None:
                self._buffer.append(payload)
        raise Empty()

    def basic_get(self, queue, no_ack=False, **kwargs):
        """One message of `queue` if there is one now, else None (kombu's SimpleQueue.get).

        The record is tracked like a delivered one: ack and reject work as for consumers. The
        channel's consumer subscribes to the queue; "nothing there" is known once the queue's
        partitions are assigned and their positions have reached the end of the log.
        """
        topic = self._topic(queue)
        # Read your own writes: what this channel produced must count as "there".
        self.confirm_deliveries()
        self._get_queues.add(queue)
        consumer = self._ensure_consumer()
        self._set_paused(consumer, False)
        deadline = time.monotonic() + self.get_timeout_seconds
        payload = self._take_buffered({topic})
        while payload is None:
            if self._caught_up(consumer, topic) or time.monotonic() > deadline:
                return None
            record = self._poll(consumer, self.poll_timeout_seconds)
            accepted = self._accept(record) if record is not None else None
            if accepted is not None and accepted["kafka_topic"] == topic:
                payload = accepted
            elif accepted is not None:
                self._buffer.append(accepted)
        message = self.Message(payload, channel=self)
        if no_ack:
            self.message_done(message)
        else:
            self.qos.append(message, message.delivery_tag)
        return message

    def _caught_up(self, consumer, topic: str) -> bool:
        """True when this consumer owns the topic's partitions and has read all of them."""
        assigned = [tp for tp in consumer.assignment() if tp.topic == topic]
        if not assigned:
            return False
        positions = consumer.position(assigned)
        unknown = [tp for tp in positions if tp.offset < 0]
        committed = {
            tp.partition: tp.offset
            for tp in (consumer.committed(unknown, timeout=10) if unknown else [])
        }
        for tp in positions:
            low, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
            position = tp.offset if tp.offset >= 0 else committed.get(tp.partition, -1)
            if high > (position if position >= 0 else low):
                return False
        return True
