"""The executor's presence thread on the real PostgreSQL: its registration follows the
consumer's partitions at once, not at the next heartbeat."""

from __future__ import annotations

import time
from contextlib import contextmanager

import pytest
from django.test import override_settings

from jobweaver.executor.presence import NEW_PARTITION_SETTLE_SECONDS, Presence
from jobweaver.scheduler.models import ExecutorRegistration
from tests.stack import wait_for

# Not the run-job queue: the session's dispatcher must never count this executor's credits.
QUEUE = "presence-test-queue"


class Channel:
    def __init__(self):
        self.partitions: list[int] = []

    def assigned_partitions(self, queue: str) -> list[int]:
        assert queue == QUEUE
        return list(self.partitions)


class Consumer:
    """The part of Celery's worker consumer the presence thread reads."""

    def __init__(self, channel: Channel):
        self.task_consumer = type("TaskConsumer", (), {"channel": channel})()


@contextmanager
def running_presence(channel: Channel):
    """A presence thread over `channel`, registered; yields a reader of its registration. A
    heartbeat far longer than the test: only the assignment watch can register in time."""
    with override_settings(JOBWEAVER_WORKER_HEARTBEAT_SECONDS=60):
        presence = Presence(consumer=Consumer(channel), queue=QUEUE, slots=3, serves=["default"])
        presence.start()
        try:

            def registered() -> ExecutorRegistration | None:
                return ExecutorRegistration.objects.filter(worker_id=presence.worker_id).first()

            wait_for(lambda: registered() is not None, timeout=10, message="registration")
            yield registered
        finally:
            presence.stop()
    assert not ExecutorRegistration.objects.filter(worker_id=presence.worker_id).exists()


@pytest.mark.django_db(transaction=True)
def test_a_new_assignment_is_registered_without_waiting_for_the_next_heartbeat():
    channel = Channel()
    with running_presence(channel) as registered:
        assert registered().partitions == []

        channel.partitions = [0, 1]  # the consumer group assigned two partitions
        wait_for(
            lambda: registered().partitions == [0, 1],
            timeout=5,
            message="the new partitions registered",
        )


@pytest.mark.django_db(transaction=True)
def test_new_partitions_wait_until_the_consumer_fetches_them_and_lost_ones_go_at_once():
    """A delivery sent to a partition the consumer does not fetch yet would wait out a whole
    fetch (presence.py): new partitions are registered only after the settle time."""
    channel = Channel()
    with running_presence(channel) as registered:
        channel.partitions, assigned = [0, 1], time.monotonic()
        wait_for(lambda: registered().partitions == [0, 1], timeout=5, message="new ones")
        assert time.monotonic() - assigned >= NEW_PARTITION_SETTLE_SECONDS

        channel.partitions = [1]  # a rebalance took partition 0 away
        wait_for(lambda: registered().partitions == [1], timeout=5, message="the loss")


@pytest.mark.django_db(transaction=True)
def test_the_deliveries_a_slot_asked_for_follow_the_jobs_length_without_waiting_for_a_beat(
    settings,
):
    """Short jobs ask for a deeper line, reported well before the next heartbeat; long ones
    bring it back to the minimum. The credits the dispatcher reads follow (slots x prefetch)."""
    from jobweaver.engine.claim.credits import credits
    from jobweaver.executor import window

    settings.JOBWEAVER_DISPATCH_PREFETCH, settings.JOBWEAVER_DISPATCH_PREFETCH_MAX = 2, 8
    window.reset()
    channel = Channel()
    channel.partitions = [0]
    try:
        with running_presence(channel) as registered:
            wait_for(lambda: registered().partitions == [0], timeout=5, message="partitions")
            assert registered().prefetch == 2  # nothing ran yet: the minimum

            for _ in range(50):
                window.ran(0.001)  # jobs of a millisecond
            wait_for(lambda: registered().prefetch == 8, timeout=5, message="the deeper line")
            mine = [c for c in credits() if c.worker_id == registered().worker_id]
            assert [c.free for c in mine] == [3 * 8]

            for _ in range(200):
                window.ran(0.5)  # jobs of half a second
            wait_for(lambda: registered().prefetch == 2, timeout=5, message="the minimum again")
    finally:
        window.reset()
