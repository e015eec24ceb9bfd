"""Kafka as the dashboard shows it: each of our topics with its partitions' end offsets and,
for the topics Celery consumes (run-job, scheduler), the consumer group's committed offsets
and lag.

Asked of the broker with short timeouts and cached for a few seconds per process, so a
dashboard polled by several operators costs the broker one round of requests per interval,
and a broker that is down costs a page a couple of seconds at most, not a hang.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from jobweaver.conf import settings
from jobweaver.core.kafka import EVENT_TOPICS, RUN_JOB, SCHEDULER, common_config, topic_name

logger = logging.getLogger(__name__)

CACHE_SECONDS = 5.0
TIMEOUT_SECONDS = 2.0
CONSUMED_TOPICS = (RUN_JOB, SCHEDULER)


@dataclass
class PartitionStatus:
    partition: int
    end_offset: int
    committed: int | None  # None: no consumer group, or it has committed nothing yet
    lag: int | None


@dataclass
class TopicStatus:
    name: str  # logical name, e.g. "run-job"
    topic: str  # with the prefix
    group: str | None
    partitions: list[PartitionStatus] = field(default_factory=list)

    @property
    def end_offset(self) -> int:
        return sum(p.end_offset for p in self.partitions)

    @property
    def lag(self) -> int | None:
        lags = [p.lag for p in self.partitions if p.lag is not None]
        return sum(lags) if self.group else None


@dataclass
class KafkaStatus:
    ok: bool
    error: str = ""
    topics: list[TopicStatus] = field(default_factory=list)
    ms: float = 0.0
    checked_at: float = 0.0  # time.monotonic() of the check


def consumer_group(base: str) -> str:
    """The group our kombu transport gives the workers consuming a topic (one queue each)."""
    return f"celery.{topic_name(base)}"


def _check() -> KafkaStatus:
    started = time.monotonic()
    admin = AdminClient({**common_config(), "socket.timeout.ms": int(TIMEOUT_SECONDS * 1000)})
    try:
        metadata = admin.list_topics(timeout=TIMEOUT_SECONDS).topics
        topics = []
        for base in (*CONSUMED_TOPICS, *EVENT_TOPICS):
            name = topic_name(base)
            if name in metadata and metadata[name].error is None:
                group = consumer_group(base) if base in CONSUMED_TOPICS else None
                topics.append(TopicStatus(base, name, group))
        partitions = {
            TopicPartition(t.topic, p): OffsetSpec.latest()
            for t in topics
            for p in metadata[t.topic].partitions
        }
        ends: dict[tuple[str, int], int] = {}
        if partitions:
            futures = admin.list_offsets(partitions, request_timeout=TIMEOUT_SECONDS)
            for tp, future in futures.items():
                ends[(tp.topic, tp.partition)] = future.result(timeout=TIMEOUT_SECONDS).offset
        committed: dict[tuple[str, int], int] = {}
        for topic in topics:
            if topic.group is None:
                continue
            request = ConsumerGroupTopicPartitions(
                topic.group,
                [TopicPartition(topic.topic, p) for p in metadata[topic.topic].partitions],
            )
            futures = admin.list_consumer_group_offsets([request], request_timeout=TIMEOUT_SECONDS)
            for future in futures.values():
                result = future.result(timeout=TIMEOUT_SECONDS)
                for tp in result.topic_partitions or []:
                    if tp.error is None and tp.offset >= 0:
                        committed[(tp.topic, tp.partition)] = tp.offset
        for topic in topics:
            for p in sorted(metadata[topic.topic].partitions):
                end = ends.get((topic.topic, p), 0)
                done = committed.get((topic.topic, p))
                lag = None
                if topic.group is not None:
                    lag = max(end - done, 0) if done is not None else end
                topic.partitions.append(PartitionStatus(p, end, done, lag))
    except (KafkaException, TimeoutError) as error:  # a broker that is down is a figure here
        logger.info("dashboard: Kafka check failed: %s", error)
        return KafkaStatus(
            ok=False,
            error=str(error) or type(error).__name__,
            ms=round((time.monotonic() - started) * 1000, 1),
            checked_at=time.monotonic(),
        )
    return KafkaStatus(
        ok=True,
        topics=topics,
        ms=round((time.monotonic() - started) * 1000, 1),
        checked_at=time.monotonic(),
    )


_lock = threading.Lock()
_cached: dict[str, KafkaStatus] = {}


def kafka_status() -> KafkaStatus:
    """The broker's view, at most CACHE_SECONDS old (per bootstrap servers and topic prefix)."""
    key = f"{settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS}|{settings.JOBWEAVER_KAFKA_TOPIC_PREFIX}"
    with _lock:
        cached = _cached.get(key)
        if cached is not None and time.monotonic() - cached.checked_at < CACHE_SECONDS:
            return cached
        status = _check()
        _cached[key] = status
        return status
