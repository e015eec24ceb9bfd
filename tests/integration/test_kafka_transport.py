"""JobWeaver's kombu transport against the real broker: commits never pass unfinished work,
reject semantics, purge."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition
from django.conf import settings
from kombu import Connection, Queue

from kombu_kafka import Transport, confirm_deliveries
from tests.stack import ROOT, child_environment, wait_for

pytestmark = [pytest.mark.integration]


def fresh_queue() -> str:
    return f"{settings.JOBWEAVER_KAFKA_TOPIC_PREFIX}transport-{uuid.uuid4().hex[:8]}"


def connection(**options) -> Connection:
    host, port = settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS.split(",")[0].rsplit(":", 1)
    return Connection(hostname=host, port=int(port), transport=Transport, transport_options=options)


def publish(queue_name: str, bodies: list[str]) -> None:
    with connection() as conn:
        producer = conn.Producer()
        for body in bodies:
            producer.publish(
                body,
                routing_key=queue_name,
                exchange="",
                serializer="json",
                declare=[Queue(queue_name, routing_key=queue_name)],
            )
        confirm_deliveries(producer.channel)


def committed_offset(group: str, queue_name: str) -> int:
    consumer = Consumer(
        {"bootstrap.servers": settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS, "group.id": group}
    )
    try:
        [tp] = consumer.committed([TopicPartition(queue_name, 0)], timeout=10)
        return tp.offset
    finally:
        consumer.close()


def probe(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.transport_probe",
            settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS,
            *args,
        ],
        cwd=ROOT,
        env=child_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_out_of_order_acks_commit_only_the_contiguous_prefix(django_db_setup):
    queue_name, group = fresh_queue(), f"probe-{uuid.uuid4().hex[:8]}"
    publish(queue_name, ["m1", "m2", "m3"])

    first = probe(queue_name, group, "ack-third-then-first")
    try:
        line = json.loads(first.stdout.readline() or "{}")
        assert line.get("bodies") == ["m1", "m2", "m3"], first.stderr.read()
        # Acked: m3, then m1. Only m1 is covered; m2 is unfinished, so m3 is not committed.
        assert committed_offset(group, queue_name) == line["offsets"][0] + 1
    finally:
        first.send_signal(signal.SIGKILL)  # no clean shutdown, no final commit
        first.communicate(timeout=10)

    second = probe(queue_name, group, "collect", "2")
    out, err = second.communicate(timeout=90)
    assert second.returncode == 0, err
    assert json.loads(out)["bodies"] == ["m2", "m3"]


def drain(conn: Connection, received: list, count: int) -> None:
    def enough():
        with contextlib.suppress(TimeoutError):
            conn.drain_events(timeout=0.2)
        return len(received) >= count

    wait_for(enough, timeout=30, interval=0, message=f"{count} messages")


def test_reject_drops_or_requeues_and_both_count_as_done(django_db_setup):
    queue_name, group = fresh_queue(), f"probe-{uuid.uuid4().hex[:8]}"
    publish(queue_name, ["requeue-me", "drop-me"])
    received: list = []
    with connection(group_id=group) as conn:
        consumer = conn.Consumer(
            Queue(queue_name, routing_key=queue_name),
            callbacks=[lambda body, msg: received.append((body, msg))],
            accept=["json"],
        )
        consumer.qos(prefetch_count=1)
        consumer.consume()
        drain(conn, received, 1)
        assert received[0][0] == "requeue-me"
        received[0][1].reject(requeue=True)
        drain(conn, received, 2)
        assert received[1][0] == "drop-me"
        received[1][1].reject(requeue=False)
        # The requeued message comes back, at the end of the topic.
        drain(conn, received, 3)
        assert received[2][0] == "requeue-me"
        received[2][1].ack()
        # The dropped one never comes back: next is a sentinel published now.
        publish(queue_name, ["sentinel"])
        drain(conn, received, 4)
        assert received[3][0] == "sentinel"
        received[3][1].ack()
        consumer.channel.commit_now()
    # Every record of the partition (two originals, the requeued copy, sentinel) is done.
    assert committed_offset(group, queue_name) == 4


def test_purge_deletes_what_is_queued(django_db_setup):
    queue_name, group = fresh_queue(), f"probe-{uuid.uuid4().hex[:8]}"
    publish(queue_name, [f"old-{i}" for i in range(5)])
    with connection() as conn:
        assert conn.default_channel.queue_purge(queue_name) == 5
    publish(queue_name, ["new"])
    received: list = []
    with connection(group_id=group) as conn:
        consumer = conn.Consumer(
            Queue(queue_name, routing_key=queue_name),
            callbacks=[lambda body, msg: received.append((body, msg))],
            accept=["json"],
        )
        consumer.consume()
        drain(conn, received, 1)
    assert [body for body, _ in received] == ["new"]


def test_celery_purge_command_works(django_db_setup):
    result = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "jobweaver_site", "purge", "-f"],
        cwd=ROOT,
        env=child_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "Purged" in result.stdout or "No messages purged" in result.stdout
