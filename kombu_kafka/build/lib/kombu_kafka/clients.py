"""Where the transport gets its Kafka clients, and the settings it gives them.

The channel never constructs a confluent_kafka client itself: it asks a `KafkaClients`
(transport option `client_factory`). Production uses the real librdkafka clients; the unit tests
pass an in-memory fake with the same small surface, so one behaviour suite runs in milliseconds
against the fake and unchanged against a real broker (the shape of arroyo's backends).
"""

from __future__ import annotations

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient


class KafkaClients:
    """Factory of the three clients the transport uses (real confluent_kafka ones)."""

    def consumer(self, config: dict) -> Consumer:
        return Consumer(config)

    def producer(self, config: dict) -> Producer:
        return Producer(config)

    def admin(self, config: dict) -> AdminClient:
        return AdminClient(config)


def consumer_defaults(group_id: str) -> dict:
    """Consumer settings under the caller's `kafka_consumer_config` (which may override any)."""
    return {
        "group.id": group_id,
        # Offsets are committed by the transport, explicitly, over finished messages only.
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 1000,
        # A consumer that stops polling this long (a hung loop, a solo-pool task that never
        # returns) leaves the group, so its partitions move to a live worker. Five minutes is
        # librdkafka's default; longer tasks belong on the threads pool, whose loop keeps
        # polling while tasks run.
        "max.poll.interval.ms": 300_000,
        # The first fetch after an assignment waits this long for data even when a record
        # arrives meanwhile, so with librdkafka's default the first message after a start or a
        # rebalance came about that default late (bench/NOTES.md).
        # Later fetches answer as soon as a record arrives; shorter waits only mean more idle
        # fetch requests (ten a second per broker connection).
        "fetch.wait.max.ms": 100,
    }


def producer_defaults() -> dict:
    return {"enable.idempotence": True, "acks": "all", "linger.ms": 2}
