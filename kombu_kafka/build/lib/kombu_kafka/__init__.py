"""kombu_kafka: a kombu transport for Apache Kafka with per-message offset commits.

A library, not part of any host application: it imports neither Django nor JobWeaver's apps
(a test proves it in a fresh interpreter). Hosts call `register()` once, then use the broker
URL `jobweaver-kafka://host:port`.

Public API:
- `register()` adds the transport alias to kombu (idempotent).
- `Transport` for `kombu.Connection(transport=Transport)`.
- `KEY_HEADER`: the message header whose value becomes the Kafka record key.
- `PARTITION_HEADER`: optional header naming the partition to produce to.
- `RECORD_HEADERS_HEADER`: optional header, a dict of str -> str set as the Kafka record's
  headers (plain pass-through, e.g. a trace id for tools that do not decode kombu's envelope).
- `default_group_id(topics)`: the consumer group of a channel consuming those topics.
- `partition_lag(config, topic, group_id)`: records after a consumer group's committed offset,
  per partition, measured from outside the group (works while every consumer is stopped).
- `Channel.assigned_partitions(queue)`: the partitions its consumer owns now.
- `confirm_deliveries(channel, timeout=None)`: wait until the broker confirmed every record
  produced on a channel; raises `KafkaDeliveryError` otherwise.
"""

from __future__ import annotations

from kombu.transport import TRANSPORT_ALIASES

from kombu_kafka.clients import KafkaClients
from kombu_kafka.topics import Topics
from kombu_kafka.transport import (
    KEY_HEADER,
    PARTITION_HEADER,
    RECORD_HEADERS_HEADER,
    Channel,
    KafkaDeliveryError,
    Transport,
    default_group_id,
)

ALIAS = "jobweaver-kafka"

__all__ = [
    "ALIAS",
    "KEY_HEADER",
    "PARTITION_HEADER",
    "RECORD_HEADERS_HEADER",
    "KafkaDeliveryError",
    "Transport",
    "confirm_deliveries",
    "default_group_id",
    "partition_lag",
    "register",
]


def register() -> None:
    """Make `jobweaver-kafka://` URLs resolve to our Transport; safe to call many times."""
    TRANSPORT_ALIASES[ALIAS] = "kombu_kafka.transport:Transport"


def confirm_deliveries(channel: object, timeout: float | None = None) -> None:
    """Wait until the broker confirmed everything produced on `channel` (a kombu channel of
    our transport, e.g. `producer.channel`); raises KafkaDeliveryError when some records were
    not confirmed. Lets callers batch produces and confirm once, without channel internals."""
    if not isinstance(channel, Channel):
        raise TypeError(f"not a kombu_kafka channel: {type(channel).__name__}")
    channel.confirm_deliveries(timeout)


def partition_lag(config: dict, topic: str, group_id: str) -> dict[int, int]:
    """Records of `topic` after consumer group `group_id`'s committed offsets, per partition,
    measured from outside the group with short-lived clients built from `config` (librdkafka
    settings, at least `bootstrap.servers`). Works while every consumer of the group is
    stopped — when lag matters most. Raises KafkaException when the broker cannot tell."""
    clients = KafkaClients()
    topics = Topics(clients.admin(config), clients.consumer, config)
    return topics.partition_lag(topic, group_id)
