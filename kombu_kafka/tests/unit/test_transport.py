"""The transport's behaviour suite over the in-memory fake Kafka (no broker, milliseconds)."""

from __future__ import annotations

from confluent_kafka import TopicPartition
from kombu import Connection

from kombu_kafka import Transport
from kombu_kafka.tests.behaviour import TransportBehaviour
from kombu_kafka.tests.fake_kafka import FakeKafka


class FakeRival:
    def __init__(self, kafka: FakeKafka, group: str, topic: str):
        self.consumer = kafka.consumer({"group.id": group})
        self.consumer.subscribe([topic])

    def poll(self):
        self.consumer._serve_events()

    def partitions(self) -> list[int]:
        return [tp.partition for tp in self.consumer.assignment()]

    def receive_all(self, count: int) -> list[str]:
        from kombu.utils.json import loads

        bodies = []
        while (record := self.consumer.poll(0)) is not None:
            bodies.append(loads(loads(record.value())["body"]))
        assert len(bodies) == count
        return bodies

    def close(self):
        self.consumer.close()


class TestTransportOverFakeKafka(TransportBehaviour):
    deadline_seconds = 2.0

    def setup_method(self):
        self.kafka = FakeKafka()

    def connection(self, **options) -> Connection:
        return Connection(
            hostname="fake",
            port=9092,
            transport=Transport,
            transport_options={"client_factory": self.kafka, **options},
        )

    def produce(self, topic, value, *, partition, key=None, headers=None):
        self.kafka.broker.append(topic, value, key, headers, partition)

    def create_topic(self, topic, partitions):
        self.kafka.broker.create_topic(topic, partitions)

    def committed(self, group, topic, partition):
        consumer = self.kafka.consumer({"group.id": group})
        [tp] = consumer.committed([TopicPartition(topic, partition)])
        return tp.offset

    def rival(self, group, topic):
        return FakeRival(self.kafka, group, topic)

    def read_topic(self, topic, count):
        return self.kafka.broker.logs[topic][0][:count]
