"""Kafka plumbing shared by every process: topic names, the event producer, topic setup.

librdkafka clients are not fork-safe, so the producer is created lazily per process (keyed by
pid) and never inherited across a fork.
"""

from __future__ import annotations

import logging
import os
import threading

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from jobweaver.conf import settings

logger = logging.getLogger(__name__)

RUN_JOB = "run-job"
SCHEDULER = "scheduler"
JOB_CREATED = "job-created"
JOB_COMPLETED = "job-completed"
JOB_FAILED = "job-failed"
JOB_DEAD_LETTER = "job-dead-letter"
WORKFLOW_FINISHED = "workflow-finished"  # key = workflow id (§16)
EVENT_TOPICS = (JOB_CREATED, JOB_COMPLETED, JOB_FAILED, JOB_DEAD_LETTER, WORKFLOW_FINISHED)
EVENT_TOPIC_PARTITIONS = 3


def topic_name(base: str) -> str:
    """The real topic for a logical one: tests and dev stacks share a broker via the prefix."""
    return f"{settings.JOBWEAVER_KAFKA_TOPIC_PREFIX}{base}"


def common_config() -> dict:
    """What every Kafka client of the project is given: the brokers, and TLS/SASL if set."""
    return {
        "bootstrap.servers": settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS,
        **settings.JOBWEAVER_KAFKA_CLIENT_CONFIG,
    }


_producer_lock = threading.Lock()
_producer: tuple[int, Producer] | None = None


def event_producer() -> Producer:
    """This process's idempotent producer for domain events (created after any fork)."""
    global _producer
    with _producer_lock:
        if _producer is None or _producer[0] != os.getpid():
            producer = Producer(
                {
                    **common_config(),
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "message.timeout.ms": 10000,
                }
            )
            _producer = (os.getpid(), producer)
        return _producer[1]


def ensure_topics(timeout: float = 30.0) -> list[str]:
    """Create the project's topics with their partition counts; returns the ones created.

    Waits until creation has finished, so a consumer subscribing right after sees them.
    """
    admin = AdminClient(common_config())
    wanted = {topic_name(RUN_JOB): settings.JOBWEAVER_RUN_JOB_PARTITIONS, topic_name(SCHEDULER): 1}
    wanted.update({topic_name(t): EVENT_TOPIC_PARTITIONS for t in EVENT_TOPICS})
    existing = admin.list_topics(timeout=timeout).topics
    missing = [
        NewTopic(
            name,
            num_partitions=parts,
            replication_factor=settings.JOBWEAVER_KAFKA_REPLICATION_FACTOR,
        )
        for name, parts in wanted.items()
        if name not in existing
    ]
    created = []
    if missing:
        for name, future in admin.create_topics(missing, operation_timeout=timeout).items():
            try:
                future.result(timeout=timeout)
                created.append(name)
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise
    return created


def broker_reachable(timeout: float = 2.0) -> bool:
    try:
        AdminClient(common_config()).list_topics(timeout=timeout)
        return True
    except KafkaException:
        return False
