"""A kombu transport for Celery over Apache Kafka (replaces kombu's `confluentkafka`).

Broker URL: `jobweaver-kafka://host:port` (alias added by `kombu_kafka.register()`).

What it fixes in the stock transport (kombu issues #1781, #1785):
- **Acks never commit unfinished work.** Every delivered message knows its topic, partition and
  offset; an ack marks it done, and the committed offset of a partition advances only over a
  contiguous run of done messages (`kombu_kafka.offsets.OffsetTracker`). Commits are explicit
  (offset + 1), made on the consumer's own thread, batched by a `CommitPolicy`, and forced on
  revoke and on close.
- **Rebalances are handled.** On revoke: drop that partition's buffered records, commit what is
  contiguous and forget its in-flight state. On assign: Kafka resumes from the committed offset.
- **One consumer per channel, subscribed to all of its queues**, polled with short timeouts.
  While the prefetch window is full the consumer keeps polling (so it keeps its group membership
  and its callbacks run) into a local buffer bounded by the prefetch count; a full buffer pauses
  the partitions.
- **Poison records are parked**, not fatal (`kombu_kafka.poison`).
- **Topics are created with configured partitions**; messages are keyed (header `KEY_HEADER`);
  producers do not flush per message: callers confirm a batch with
  `kombu_kafka.confirm_deliveries(channel)`, and delivery errors surface there.

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
from collections import deque

from confluent_kafka import KafkaError, KafkaException
from kombu.transport import virtual
from kombu.utils.json import dumps

from kombu_kafka.clients import KafkaClients, producer_defaults
from kombu_kafka.consuming import ConsumingChannel
from kombu_kafka.offsets import CommitPolicy, OffsetTracker
from kombu_kafka.topics import Topics

logger = logging.getLogger(__name__)

DEFAULT_PORT = 9092
KEY_HEADER = "kafka_key"
# Optional header: produce to this partition instead of the key's (a host that routes work to
# the partitions of a chosen consumer, e.g. for flow control).
PARTITION_HEADER = "kafka_partition"
# Optional header: a dict of str -> str copied onto the Kafka record's own headers (e.g. a trace
# id), so tools that read records without decoding kombu's envelope still see them.
RECORD_HEADERS_HEADER = "kafka_record_headers"
# librdkafka reports these when no broker of the bootstrap list can be reached.
_UNREACHABLE = {KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT, KafkaError._RESOLVE}


def default_group_id(topics: tuple[str, ...]) -> str:
    """The consumer group of a channel consuming `topics` (unless `group_id` is set)."""
    return "celery." + "+".join(topics)


class KafkaDeliveryError(KafkaException):
    """Some produced messages were not confirmed by the broker."""


class KafkaConnectionError(KafkaException):
    """The broker cannot be reached (kombu then tries the next failover URL)."""


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


class Channel(ConsumingChannel, virtual.Channel):
    QoS = QoS
    Message = Message

    from_transport_options = (
        *virtual.Channel.from_transport_options,
        "poll_timeout_seconds",
        "get_timeout_seconds",
        "topic_prefix",
        "topic_partitions",
        "default_partitions",
        "replication_factor",
        "group_id",
        "commit_max_messages",
        "commit_interval_seconds",
        "delivery_timeout_seconds",
        "buffer_max_messages",
        "parked_topic",
        "client_factory",
        "kafka_common_config",
        "kafka_consumer_config",
        "kafka_producer_config",
    )
    poll_timeout_seconds = 0.1
    # basic_get waits at most this long for its consumer to join the group and fetch.
    get_timeout_seconds = 10.0
    # Prepended to every queue name to make its topic (several stacks can share a broker).
    topic_prefix = ""
    topic_partitions: dict[str, int] = {}
    default_partitions = 1
    replication_factor = 1
    group_id: str | None = None
    commit_max_messages = 200
    commit_interval_seconds = 0.5
    delivery_timeout_seconds = 30.0
    # Records polled ahead of the prefetch window; None = the prefetch count (see _buffer_bound).
    buffer_max_messages: int | None = None
    # Where undecodable records go; None = "<topic>.parked".
    parked_topic: str | None = None
    client_factory: KafkaClients = KafkaClients()
    kafka_common_config: dict = {}
    kafka_consumer_config: dict = {}
    kafka_producer_config: dict = {}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._pid = os.getpid()
        self._consumer = None
        self._consumer_group: str | None = None
        self._subscribed: tuple[str, ...] = ()
        self._get_queues: set[str] = set()
        self._paused = False
        self._buffer: deque[dict] = deque()
        self._producer = None
        self._topics: Topics | None = None
        self._delivery_errors: list[str] = []
        self._delivery_lock = threading.Lock()
        self.broker_unreachable = threading.Event()
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

    def _on_client_error(self, error: KafkaError) -> None:
        if error.code() in _UNREACHABLE:
            self.broker_unreachable.set()

    @property
    def common_config(self) -> dict:
        conninfo = self.connection.client
        hosts = conninfo.hostname or "localhost"
        servers = ",".join(
            host if ":" in host else f"{host}:{conninfo.port or DEFAULT_PORT}"
            for host in hosts.split(",")
        )
        return {
            "bootstrap.servers": servers,
            "error_cb": self._on_client_error,
            **self.kafka_common_config,
        }

    @property
    def topics(self) -> Topics:
        self._check_pid()
        if self._topics is None:
            config = self.common_config
            self._topics = Topics(
                self.client_factory.admin(config), self.client_factory.consumer, config
            )
        return self._topics

    @property
    def admin(self):
        return self.topics.admin

    @property
    def producer(self):
        self._check_pid()
        if self._producer is None:
            self._producer = self.client_factory.producer(
                {**producer_defaults(), **self.common_config, **self.kafka_producer_config}
            )
        return self._producer

    def _topic(self, queue: str) -> str:
        return self.topic_prefix + queue

    def _queue(self, topic: str) -> str:
        return topic[len(self.topic_prefix) :] if topic.startswith(self.topic_prefix) else topic

    def _group_id(self, topics: tuple[str, ...]) -> str:
        return self.group_id or self._consumer_group or default_group_id(topics)

    # --- producing ----------------------------------------------------------------------------

    def _on_delivery(self, err, msg) -> None:
        if err is not None:
            with self._delivery_lock:
                self._delivery_errors.append(f"{msg.topic()}: {err}")

    def _produce(self, topic: str, value: bytes, *, key, headers=None, partition=None) -> None:
        extra = {"partition": partition} if partition is not None else {}
        while True:
            try:
                self.producer.produce(
                    topic,
                    value=value,
                    key=key,
                    headers=headers,
                    on_delivery=self._on_delivery,
                    **extra,
                )
                break
            except BufferError:  # local queue full: let librdkafka send some, then retry
                self.producer.poll(0.1)
        self.producer.poll(0)

    def _put(self, queue, message, **kwargs):
        topic = self._topic(queue)
        self._ensure_topic(topic)
        self._produce_message(topic, message)

    def _produce_message(self, topic: str, message: dict) -> None:
        headers = message.get("headers") or {}
        key, partition = headers.get(KEY_HEADER), headers.get(PARTITION_HEADER)
        record_headers = headers.get(RECORD_HEADERS_HEADER) or {}
        self._produce(
            topic,
            dumps(message).encode(),
            key=str(key).encode() if key is not None else None,
            headers=[(str(name), str(value).encode()) for name, value in record_headers.items()]
            or None,
            partition=int(partition) if partition is not None else None,
        )

    def assigned_partitions(self, queue: str) -> list[int]:
        """Partitions of the queue's topic that this channel's consumer owns now (any
        thread)."""
        return self.tracker.partitions(self._topic(queue))

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
        topic = message.kafka_topic or self._topic(message.delivery_info["routing_key"])
        self._produce_message(topic, payload)
        self.confirm_deliveries()

    # --- queues = topics ----------------------------------------------------------------------

    def _ensure_topic(self, topic: str) -> None:
        partitions = self.topic_partitions.get(
            topic, self.topic_partitions.get(self._queue(topic), self.default_partitions)
        )
        self.topics.ensure(topic, partitions=partitions, replication_factor=self.replication_factor)

    def _new_queue(self, queue, **kwargs):
        self._ensure_topic(self._topic(queue))

    def _has_queue(self, queue, **kwargs):
        return self.topics.exists(self._topic(queue))

    def _delete(self, queue, *args, **kwargs):
        self.topics.delete(self._topic(queue))

    def _size(self, queue) -> int:
        """Messages not yet consumed by this channel's group (committed offset to the end);
        0 when the broker cannot tell right now (kombu calls this on every queue_declare)."""
        topic = self._topic(queue)
        try:
            return self.topics.lag(topic, self._group_id((topic,)))
        except KafkaException as exc:
            logger.info("size of %s unknown: %s", queue, exc)
            return 0

    def _purge(self, queue) -> int:
        """Delete every record currently in the topic; returns how many were deleted."""
        return self.topics.purge(self._topic(queue))

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
            self._consumer = self._producer = self._topics = None
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
        asynchronous=False, exchange_type=frozenset(["direct", "topic"]), heartbeats=False
    )

    def driver_version(self) -> str:
        import confluent_kafka

        return confluent_kafka.__version__

    def establish_connection(self):
        """Open a channel and prove the broker answers; fail fast when it cannot be reached,
        with a recoverable error, so kombu's failover moves on to the next URL."""
        connection = super().establish_connection()
        channel = self._avail_channels[-1]
        timeout = self.client.connect_timeout or 10
        deadline = time.monotonic() + timeout
        while True:
            try:
                channel.admin.list_topics(timeout=min(0.5, timeout))
                return connection
            except KafkaException as exc:
                channel.admin.poll(0)  # serves error_cb: is every broker down?
                if channel.broker_unreachable.is_set() or time.monotonic() > deadline:
                    self._avail_channels.remove(channel)
                    channel.close()
                    raise KafkaConnectionError(f"Kafka broker unreachable: {exc}") from exc

    def as_uri(self, uri: str, include_password: bool = False, mask: str = "**") -> str:
        return uri
