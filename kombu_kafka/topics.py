"""Queues are Kafka topics: create (and wait until every partition has a leader), check, delete,
measure and purge them through the AdminClient."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

# Admin calls get this long: the broker is local or near, and callers have deadlines.
ADMIN_TIMEOUT = 10


class Topics:
    """Topic administration for one channel. `new_consumer(config)` makes a short-lived
    consumer for offset queries (watermarks, committed offsets)."""

    def __init__(self, admin, new_consumer: Callable[[dict], object], common_config: dict):
        self.admin = admin
        self._new_consumer = new_consumer
        self._common_config = common_config
        self._known: set[str] = set()

    def ensure(self, topic: str, *, partitions: int, replication_factor: int) -> None:
        if topic in self._known:
            return
        if topic not in self.admin.list_topics(timeout=ADMIN_TIMEOUT).topics:
            new = NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)
            for future in self.admin.create_topics([new], operation_timeout=30).values():
                try:
                    future.result(timeout=30)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise
            # Creation has finished when every partition has a leader.
            deadline = time.monotonic() + 30
            while not self._ready(topic):
                if time.monotonic() > deadline:
                    raise KafkaException(f"topic {topic} has no leaders 30 s after creation")
                time.sleep(0.05)
        self._known.add(topic)

    def _ready(self, topic: str) -> bool:
        # The metadata of every topic, not of this one: a request naming a topic that does not
        # exist makes a broker with auto.create.topics.enable create it, with the broker's
        # default partitions, and a lag reading before the topics were set up would do that.
        metadata = self.admin.list_topics(timeout=ADMIN_TIMEOUT).topics.get(topic)
        return (
            metadata is not None
            and metadata.error is None
            and bool(metadata.partitions)
            and all(p.leader >= 0 for p in metadata.partitions.values())
        )

    def exists(self, topic: str) -> bool:
        return topic in self.admin.list_topics(timeout=ADMIN_TIMEOUT).topics

    def delete(self, topic: str) -> None:
        for future in self.admin.delete_topics([topic], operation_timeout=30).values():
            future.result(timeout=30)
        self._known.discard(topic)

    def watermarks(self, topic: str) -> list[tuple[int, int, int]]:
        """(partition, low, high) of every partition of the topic."""
        # The metadata of every topic, not of this one: a request naming a topic that does not
        # exist makes a broker with auto.create.topics.enable create it, with the broker's
        # default partitions, and a lag reading before the topics were set up would do that.
        metadata = self.admin.list_topics(timeout=ADMIN_TIMEOUT).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return []
        probe = self._new_consumer(
            {**self._common_config, "group.id": f"kombu-kafka-probe-{uuid.uuid4()}"}
        )
        try:
            return [
                (p, *probe.get_watermark_offsets(TopicPartition(topic, p), timeout=ADMIN_TIMEOUT))
                for p in metadata.partitions
            ]
        finally:
            probe.close()

    def lag(self, topic: str, group_id: str) -> int:
        """Records of the topic after the group's committed offsets."""
        return sum(self.partition_lag(topic, group_id).values())

    def partition_lag(self, topic: str, group_id: str) -> dict[int, int]:
        """Records after the group's committed offset, per partition (from the low watermark
        where the group has committed nothing)."""
        marks = self.watermarks(topic)
        if not marks:
            return {}
        probe = self._new_consumer({**self._common_config, "group.id": group_id})
        try:
            committed = probe.committed(
                [TopicPartition(topic, p) for p, _, _ in marks], timeout=ADMIN_TIMEOUT
            )
        finally:
            probe.close()
        by_partition = {tp.partition: tp.offset for tp in committed}
        return {
            p: high - (by_partition[p] if by_partition.get(p, -1) >= 0 else low)
            for p, low, high in marks
        }

    def purge(self, topic: str) -> int:
        """Delete every record currently in the topic; returns how many were deleted."""
        marks = [(p, low, high) for p, low, high in self.watermarks(topic) if high > low]
        if not marks:
            return 0
        futures = self.admin.delete_records(
            [TopicPartition(topic, p, high) for p, _, high in marks], operation_timeout=30
        )
        for future in futures.values():
            future.result(timeout=30)
        return sum(high - low for _, low, high in marks)
