"""The transport's behaviour suite (kombu_kafka/tests/behaviour.py) on the real Kafka broker:
the same tests the unit suite runs over the in-memory fake."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from django.conf import settings
from kombu import Connection
from kombu.utils.json import loads

from kombu_kafka import Transport
from kombu_kafka.tests.behaviour import TransportBehaviour

pytestmark = [pytest.mark.integration]


def bootstrap() -> str:
    return settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS


class BrokerRival:
    """A plain confluent_kafka member of the group (cooperative-sticky like the transport)."""

    def __init__(self, group: str, topic: str):
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap(),
                "group.id": group,
                "partition.assignment.strategy": "cooperative-sticky",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe([topic])
        # Records that arrive while the test is still waiting for the rebalance: the partition
        # can be assigned early inside one poll() and its first records fetched before that
        # same call returns, so they are kept for receive_all rather than treated as an error.
        self.early: list = []

    def poll(self):
        record = self.consumer.poll(0.05)
        if record is not None and record.error() is None:
            self.early.append(record)

    def partitions(self) -> list[int]:
        return [tp.partition for tp in self.consumer.assignment()]

    def receive_all(self, count: int) -> list[str]:
        bodies = [loads(loads(record.value())["body"]) for record in self.early]
        deadline = time.monotonic() + 30
        while len(bodies) < count and time.monotonic() < deadline:
            record = self.consumer.poll(0.2)
            if record is not None and record.error() is None:
                bodies.append(loads(loads(record.value())["body"]))
        # Nothing more arrives after the expected records.
        extra = self.consumer.poll(1.0)
        assert extra is None or extra.error() is not None
        return bodies

    def close(self):
        self.consumer.close()


class TestTransportOnKafka(TransportBehaviour):
    def names(self) -> tuple[str, str]:
        queue, group = super().names()
        return settings.JOBWEAVER_KAFKA_TOPIC_PREFIX + queue, group

    def connection(self, **options) -> Connection:
        host, port = bootstrap().split(",")[0].rsplit(":", 1)
        return Connection(
            hostname=host, port=int(port), transport=Transport, transport_options=options
        )

    def produce(self, topic, value, *, partition, key=None, headers=None):
        producer = Producer({"bootstrap.servers": bootstrap()})
        producer.produce(topic, value=value, key=key, headers=headers, partition=partition)
        assert producer.flush(30) == 0

    def create_topic(self, topic, partitions):
        admin = AdminClient({"bootstrap.servers": bootstrap()})
        for future in admin.create_topics([NewTopic(topic, num_partitions=partitions)]).values():
            future.result(timeout=30)
        deadline = time.monotonic() + 30
        while True:
            metadata = admin.list_topics(topic, timeout=10).topics.get(topic)
            if (
                metadata
                and metadata.error is None
                and len(metadata.partitions) == partitions
                and all(p.leader >= 0 for p in metadata.partitions.values())
            ):
                return
            assert time.monotonic() < deadline, f"topic {topic} not ready"
            time.sleep(0.05)

    def committed(self, group, topic, partition):
        consumer = Consumer({"bootstrap.servers": bootstrap(), "group.id": group})
        try:
            [tp] = consumer.committed([TopicPartition(topic, partition)], timeout=10)
            return tp.offset
        finally:
            consumer.close()

    def rival(self, group, topic):
        return BrokerRival(group, topic)

    def read_topic(self, topic, count):
        consumer = Consumer({"bootstrap.servers": bootstrap(), "group.id": f"read-{topic}"})
        consumer.assign([TopicPartition(topic, 0, 0)])
        records = []
        deadline = time.monotonic() + 30
        try:
            while len(records) < count and time.monotonic() < deadline:
                record = consumer.poll(0.2)
                if record is not None and record.error() is None:
                    records.append(record)
            return records
        finally:
            consumer.close()


def test_reading_the_lag_of_a_topic_that_does_not_exist_does_not_create_it():
    """The dev broker auto-creates topics: a lag reading (a metrics scrape) before the topics
    were set up must not create run-job with the broker's one default partition."""
    import kombu_kafka

    topic = f"{settings.JOBWEAVER_KAFKA_TOPIC_PREFIX}never-made-{time.monotonic_ns()}"
    config = {"bootstrap.servers": bootstrap()}

    assert kombu_kafka.partition_lag(config, topic, "some-group") == {}
    assert topic not in AdminClient(config).list_topics(timeout=10).topics
