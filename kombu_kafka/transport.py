"""JobWeaver's kombu transport for Celery over Apache Kafka (replaces kombu's `confluentkafka`).

Broker URL: `jobweaver-kafka://host:port` (alias added by `kombu_kafka.register()`).

What it fixes in the stock transport (kombu issues #1781, #1785):
- **Acks never commit unfinished work.** Every delivered message knows its topic, partition and
  offset; an ack marks it done, and the committed offset of a partition advances only over a
  contiguous run of done messages (`kombu_kafka.offsets.OffsetTracker`). Commits are explicit
  (offset + 1), made on the consumer's own thread, batched by a `CommitPolicy`, and forced on
  revoke and on close.
- **Rebalances are handled.** On revoke: commit what is contiguous and drop that partition's
  in-flight state. On assign: Kafka resumes from the committed offset. Redelivered work is
  harmless because the executor fences by event id.
- **One consumer per channel, subscribed to all of its queues**, polled with short timeouts. While
  the prefetch window is full the consumer keeps polling into a small local buffer (so it keeps
  its group membership and its callbacks run); only a full buffer pauses the partitions.
- **Topics are created with configured partitions** (waiting for creation); messages are keyed
  (Celery header `kafka_key`, e.g. the job id); producers do not flush per message: callers
  confirm a batch with `Channel.confirm_deliveries()`, and delivery errors surface there.
- **Purge** deletes the records up to the high watermark (AdminClient.delete_records).

Reject: `requeue=False` drops the message (it counts as done); `requeue=True` publishes it again
at the end of its topic (same key), confirms that, and then counts the original as done.
Unacknowledged messages are never "restored" at shutdown: Kafka redelivers everything after the
last commit to the next owner of the partition.

Fork safety: librdkafka clients are not fork-safe. Clients are created lazily on first use and
tied to the pid that created them; a channel used in another process refuses to run.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import deque
from queue import Empty

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kombu.transport import virtual
from kombu.utils.json import dumps, loads

from kombu_kafka.offsets import CommitPolicy, OffsetTracker

logger = logging.getLogger(__name__)

DEFAULT_PORT = 9092
KEY_HEADER = "kafka_key"


class KafkaDeliveryError(KafkaException):
    """Some produced messages were not confirmed by the broker."""


class Message(virtual.Message):
    def __init__(self, payload, channel=None, **kwargs):
        self.kafka_topic = payload.pop("kafka_topic", None)
        self.kafka_partition = payload.pop("kafka_partition", None)
        self.kafka_offset = payload.pop("kafka_offset", None)
        super().__init__(payload, channel=channel, **kwargs)


class QoS(virtual.QoS):
    """Prefetch accounting of the virtual transport, plus offset tracking on ack/reject."""

    # Kafka redelivers whatever was not committed; re-publishing unacked messages at shutdown
    # (the virtual transport's default) would only create duplicates.
    restore_at_shutdown = False

    def ack(self, delivery_tag):
        message = self._delivered.get(delivery_tag)
        if message is not None:
            self.channel.message_done(message)
        super().ack(delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        message = self._delivered.get(delivery_tag)
        if message is not None:
            if requeue:
                self.channel.republish(message)
            self.channel.message_done(message)
        self._quick_ack(delivery_tag)

    def restore_unacked_once(self, stderr=None):
        self._delivered.clear()
        self._dirty.clear()


class Channel(virtual.Channel):
    QoS = QoS
    Message = Message

    from_transport_options = (
        *virtual.Channel.from_transport_options,
        "poll_timeout_seconds",
        "topic_partitions",
        "default_partitions",
        "replication_factor",
        "group_id",
        "commit_max_messages",
        "commit_interval_seconds",
        "delivery_timeout_seconds",
        "buffer_max_messages",
        "kafka_common_config",
        "kafka_consumer_config",
        "kafka_producer_config",
    )
    poll_timeout_seconds = 0.1
    topic_partitions: dict[str, int] = {}
    default_partitions = 1
    replication_factor = 1
    group_id: str | None = None
    commit_max_messages = 200
    commit_interval_seconds = 0.5
    delivery_timeout_seconds = 30.0
    # Records polled ahead of the prefetch window; above this the partitions are paused.
    buffer_max_messages = 500
    kafka_common_config: dict = {}
    kafka_consumer_config: dict = {}
    kafka_producer_config: dict = {}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._pid = os.getpid()
        self._consumer: Consumer | None = None
        self._subscribed: tuple[str, ...] = ()
        self._paused = False
        self._buffer: deque[dict] = deque()
        self._producer: Producer | None = None
        self._admin: AdminClient | None = None
        self._known_topics: set[str] = set()
        self._delivery_errors: list[str] = []
        self._delivery_lock = threading.Lock()
        self.tracker = OffsetTracker(
            CommitPolicy(self.commit_max_messages, self.commit_interval_seconds)
        )

    # --- clients ---------------------------------------------------------------------------

    def _check_pid(self) -> None:
        if os.getpid() != self._pid:
            raise RuntimeError(
                "a Kafka channel was created before fork() and used after it; librdkafka "
                "clients are not fork-safe (use the solo or threads pool)"
            )

    @property
    def common_config(self) -> dict:
        conninfo = self.connection.client
        hosts = conninfo.hostname or "localhost"
        servers = ",".join(
            host if ":" in host else f"{host}:{conninfo.port or DEFAULT_PORT}"
            for host in hosts.split(",")
        )
        return {"bootstrap.servers": servers, **self.kafka_common_config}

    @property
    def admin(self) -> AdminClient:
        self._check_pid()
        if self._admin is None:
            self._admin = AdminClient(self.common_config)
        return self._admin

    @property
    def producer(self) -> Producer:
        self._check_pid()
        if self._producer is None:
            self._producer = Producer(
                {
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 2,
                    **self.common_config,
                    **self.kafka_producer_config,
                }
            )
        return self._producer

    def _group_id(self, queues: tuple[str, ...]) -> str:
        return self.group_id or "celery." + "+".join(queues)

    def _ensure_consumer(self) -> Consumer:
        self._check_pid()
        queues = tuple(sorted(set(self._active_queues)))
        if self._consumer is None:
            self._consumer = Consumer(
                {
                    "group.id": self._group_id(queues),
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "auto.offset.reset": "earliest",
                    "partition.assignment.strategy": "cooperative-sticky",
                    "session.timeout.ms": 10000,
                    "heartbeat.interval.ms": 1000,
                    # The solo pool runs a task inside the poll loop: the loop may not poll for
                    # as long as the longest task.
                    "max.poll.interval.ms": 3_600_000,
                    **self.common_config,
                    **self.kafka_consumer_config,
                }
            )
        if queues != self._subscribed:
            for queue in queues:
                self._ensure_topic(queue)
            self._consumer.subscribe(
                list(queues),
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            self._subscribed = queues
            self._paused = False
        return self._consumer

    # --- rebalance callbacks (run inside consumer.poll, on the consumer's thread) -------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.tracker.assign([(tp.topic, tp.partition) for tp in partitions])
        if self._paused and partitions:
            # Newly assigned partitions start paused too while the prefetch window is full.
            consumer.incremental_assign(partitions)
            consumer.pause(partitions)
        logger.info("assigned %s", [(tp.topic, tp.partition) for tp in partitions])

    def _drop_buffered(self, partitions: list[TopicPartition]) -> None:
        # Their new owner reads them again from the last commit.
        gone = {(tp.topic, tp.partition) for tp in partitions}
        self._buffer = deque(
            p for p in self._buffer if (p["kafka_topic"], p["kafka_partition"]) not in gone
        )

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._drop_buffered(partitions)
        final = self.tracker.revoke([(tp.topic, tp.partition) for tp in partitions])
        self._commit(final, asynchronous=False)
        logger.info("revoked %s", [(tp.topic, tp.partition) for tp in partitions])

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
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
            # (the executor fences duplicates). The next commit covers them.
            logger.warning("offset commit failed: %s", exc)
            return
        self.tracker.mark_committed(offsets)

    def commit_now(self) -> None:
        """Commit every contiguous finished offset (consumer thread only)."""
        self._commit(self.tracker.committable(), asynchronous=False)

    def message_done(self, message: Message) -> None:
        """A delivered message finished (ack or reject): may be called from any thread."""
        if message.kafka_topic is not None:
            self.tracker.done(message.kafka_topic, message.kafka_partition, message.kafka_offset)

    # --- consuming ----------------------------------------------------------------------------

    def _set_paused(self, consumer: Consumer, paused: bool) -> None:
        if paused == self._paused:
            return
        assignment = consumer.assignment()
        if assignment:
            (consumer.pause if paused else consumer.resume)(assignment)
        self._paused = paused

    def _poll_record(self, consumer: Consumer, timeout: float) -> dict | None:
        """One record from Kafka as a kombu payload, tracked as in flight from now on."""
        record = consumer.poll(timeout)
        if record is None:
            return None
        if record.error() is not None:
            if record.error().code() != KafkaError._PARTITION_EOF:
                logger.warning("consumer error: %s", record.error())
            return None
        payload = loads(record.value())
        payload["kafka_topic"] = record.topic()
        payload["kafka_partition"] = record.partition()
        payload["kafka_offset"] = record.offset()
        # A tag per delivery: the same message delivered twice must not share QoS state.
        payload.setdefault("properties", {})["delivery_tag"] = uuid.uuid4().hex
        # Tracked at poll time, in partition order: the watermark can never pass a record that
        # is still buffered here.
        self.tracker.delivered(record.topic(), record.partition(), record.offset())
        return payload

    def drain_events(self, timeout=None, callback=None):
        """Deliver one message if the prefetch window allows, else keep polling into a small
        local buffer (so the consumer stays in its group and fetches continuously); only a
        full buffer pauses the partitions."""
        callback = callback or self.connection._deliver
        if not self._consumers or not self._active_queues:
            raise Empty()
        consumer = self._ensure_consumer()
        if self.tracker.should_commit():
            self.commit_now()
        if self.qos.can_consume():
            self._set_paused(consumer, False)
            payload = self._buffer.popleft() if self._buffer else None
            if payload is None:
                payload = self._poll_record(consumer, self.poll_timeout_seconds)
            if payload is None:
                raise Empty()
            callback(payload, payload["kafka_topic"])
            return
        if len(self._buffer) >= self.buffer_max_messages:
            self._set_paused(consumer, True)
        payload = self._poll_record(consumer, self.poll_timeout_seconds)
        if payload is not None:
            self._buffer.append(payload)
        raise Empty()

    def basic_get(self, queue, no_ack=False, **kwargs):
        raise NotImplementedError("basic_get is not supported by the Kafka transport")

    # --- producing ----------------------------------------------------------------------------

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            with self._delivery_lock:
                self._delivery_errors.append(f"{msg.topic()}: {err}")

    def _put(self, queue, message, **kwargs):
        self._ensure_topic(queue)
        key = (message.get("headers") or {}).get(KEY_HEADER)
        value = dumps(message).encode()
        while True:
            try:
                self.producer.produce(
                    queue,
                    value=value,
                    key=str(key).encode() if key is not None else None,
                    on_delivery=self._on_delivery,
                )
                break
            except BufferError:  # local queue full: let librdkafka send some, then retry
                self.producer.poll(0.1)
        self.producer.poll(0)

    def confirm_deliveries(self, timeout: float | None = None) -> None:
        """Wait until the broker confirmed every message produced on this channel; raises
        KafkaDeliveryError when some were not."""
        if self._producer is None:
            return
        remaining = self._producer.flush(timeout or self.delivery_timeout_seconds)
        with self._delivery_lock:
            errors, self._delivery_errors = self._delivery_errors, []
        if remaining or errors:
            raise KafkaDeliveryError(
                f"{remaining} message(s) unconfirmed, {len(errors)} failed: {errors[:3]}"
            )

    def republish(self, message: Message) -> None:
        """Requeue = publish again at the end of the topic, confirmed, before the original is
        marked done (at-least-once: the message exists again before it is let go)."""
        payload = message.serializable()
        payload["redelivered"] = True
        self._put(message.kafka_topic or message.delivery_info["routing_key"], payload)
        self.confirm_deliveries()

    # --- queues = topics ----------------------------------------------------------------------

    def _ensure_topic(self, topic: str) -> None:
        if topic in self._known_topics:
            return
        if topic not in self.admin.list_topics(timeout=10).topics:
            partitions = self.topic_partitions.get(topic, self.default_partitions)
            new = NewTopic(
                topic, num_partitions=partitions, replication_factor=self.replication_factor
            )
            for future in self.admin.create_topics([new], operation_timeout=30).values():
                try:
                    future.result(timeout=30)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise
            # Creation has finished when every partition has a leader.
            deadline = time.monotonic() + 30
            while not self._topic_ready(topic):
                if time.monotonic() > deadline:
                    raise KafkaException(f"topic {topic} has no leaders 30 s after creation")
                time.sleep(0.05)
        self._known_topics.add(topic)

    def _topic_ready(self, topic: str) -> bool:
        metadata = self.admin.list_topics(topic, timeout=10).topics.get(topic)
        return (
            metadata is not None
            and metadata.error is None
            and bool(metadata.partitions)
            and all(p.leader >= 0 for p in metadata.partitions.values())
        )

    def _new_queue(self, queue, **kwargs):
        self._ensure_topic(queue)

    def _has_queue(self, queue, **kwargs):
        return queue in self.admin.list_topics(timeout=10).topics

    def _delete(self, queue, *args, **kwargs):
        for future in self.admin.delete_topics([queue], operation_timeout=30).values():
            future.result(timeout=30)
        self._known_topics.discard(queue)

    def _watermarks(self, queue) -> list[tuple[int, int, int]]:
        """(partition, low, high) of every partition of the topic."""
        metadata = self.admin.list_topics(queue, timeout=10).topics.get(queue)
        if metadata is None or metadata.error is not None:
            return []
        probe = Consumer({**self.common_config, "group.id": f"jobweaver-probe-{uuid.uuid4()}"})
        try:
            return [
                (p, *probe.get_watermark_offsets(TopicPartition(queue, p), timeout=10))
                for p in metadata.partitions
            ]
        finally:
            probe.close()

    def _size(self, queue) -> int:
        """Messages not yet consumed by this channel's group (committed offset to the end);
        0 when the broker cannot tell right now (kombu calls this on every queue_declare)."""
        try:
            return self._lag(queue)
        except KafkaException as exc:
            logger.info("size of %s unknown: %s", queue, exc)
            return 0

    def _lag(self, queue) -> int:
        marks = self._watermarks(queue)
        if not marks:
            return 0
        probe = Consumer({**self.common_config, "group.id": self._group_id((queue,))})
        try:
            committed = probe.committed([TopicPartition(queue, p) for p, _, _ in marks], timeout=10)
        finally:
            probe.close()
        by_partition = {tp.partition: tp.offset for tp in committed}
        return sum(
            high - (by_partition[p] if by_partition.get(p, -1) >= 0 else low)
            for p, low, high in marks
        )

    def _purge(self, queue) -> int:
        """Delete every record currently in the topic; returns how many were deleted."""
        marks = [(p, low, high) for p, low, high in self._watermarks(queue) if high > low]
        if not marks:
            return 0
        futures = self.admin.delete_records(
            [TopicPartition(queue, p, high) for p, _, high in marks], operation_timeout=30
        )
        for future in futures.values():
            future.result(timeout=30)
        return sum(high - low for _, low, high in marks)

    # --- lifecycle ----------------------------------------------------------------------------

    def close(self):
        if self.closed:
            return
        try:
            if os.getpid() == self._pid:
                if self._consumer is not None:
                    self.commit_now()
                    self._consumer.close()  # revokes: the revoke callback commits again
                if self._producer is not None:
                    remaining = self._producer.flush(self.delivery_timeout_seconds)
                    if remaining:
                        logger.warning("%d produced message(s) unconfirmed at close", remaining)
        finally:
            self._consumer = self._producer = self._admin = None
            super().close()


class Transport(virtual.Transport):
    Channel = Channel
    default_port = DEFAULT_PORT
    driver_type = "kafka"
    driver_name = "jobweaver-kafka"
    # Celery's consumer loop sleeps polling_interval after an empty drain; our poll already
    # blocks in librdkafka for poll_timeout_seconds.
    polling_interval = 0
    recoverable_connection_errors = (KafkaException,)
    recoverable_channel_errors = ()

    implements = virtual.Transport.implements.extend(
        asynchronous=False, exchange_type=frozenset(["direct"]), heartbeats=False
    )

    def driver_version(self) -> str:
        import confluent_kafka

        return confluent_kafka.__version__

    def establish_connection(self):
        connection = super().establish_connection()
        channel = self._avail_channels[-1]
        try:
            channel.admin.list_topics(timeout=10)
        except KafkaException as exc:
            raise KafkaException(f"Kafka broker unreachable: {exc}") from exc
        return connection

    def as_uri(self, uri: str, include_password: bool = False, mask: str = "**") -> str:
        return uri
