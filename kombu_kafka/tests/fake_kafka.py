"""An in-memory stand-in for the confluent_kafka clients the transport uses.

Only the surface `kombu_kafka` calls: a log per partition, committed offsets per group, a group
coordinator that hands partitions out stickily and runs the rebalance callbacks inside `poll`
(as librdkafka does), pause/resume/seek, produce with delivery callbacks. It never sleeps: a
`poll` with nothing to return returns None at once, so the behaviour suite runs in milliseconds.
"""

from __future__ import annotations

import math
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace

from confluent_kafka import TopicPartition

OFFSET_INVALID = -1001


@dataclass
class FakeRecord:
    _topic: str
    _partition: int
    _offset: int
    _key: bytes | None
    _value: bytes | None
    _headers: list | None

    def topic(self):
        return self._topic

    def partition(self):
        return self._partition

    def offset(self):
        return self._offset

    def key(self):
        return self._key

    def value(self):
        return self._value

    def headers(self):
        return self._headers

    def error(self):
        return None


@dataclass
class FakeBroker:
    logs: dict[str, list[list[FakeRecord]]] = field(default_factory=dict)
    committed: dict[tuple[str, str, int], int] = field(default_factory=dict)
    members: dict[str, list[FakeConsumer]] = field(default_factory=dict)

    def create_topic(self, topic: str, partitions: int = 1) -> None:
        self.logs.setdefault(topic, [[] for _ in range(partitions)])

    def append(self, topic, value, key=None, headers=None, partition=None) -> FakeRecord:
        self.create_topic(topic)
        partitions = self.logs[topic]
        if partition is None:
            partition = hash(key) % len(partitions) if key is not None else 0
        log = partitions[partition]
        record = FakeRecord(topic, partition, len(log), key, value, list(headers or []) or None)
        log.append(record)
        return record

    def rebalance(self, group: str) -> None:
        """Sticky assignment: owners keep partitions up to a fair share; the rest go to the
        member with the fewest. Members learn the difference at their next poll."""
        members = self.members.get(group, [])
        target: dict[int, set[tuple[str, int]]] = {id(m): set() for m in members}
        topics = sorted({t for m in members for t in m.topics})
        for topic in topics:
            eligible = [m for m in members if topic in m.topics]
            tps = [(topic, p) for p in range(len(self.logs.get(topic, [])))]
            quota = math.ceil(len(tps) / len(eligible))
            unowned = []
            for tp in tps:
                owner = next((m for m in eligible if tp in m.owned), None)
                mine = owner and sum(1 for x in target[id(owner)] if x[0] == topic)
                if owner is not None and mine < quota:
                    target[id(owner)].add(tp)
                else:
                    unowned.append(tp)
            for tp in unowned:
                least = min(eligible, key=lambda m: sum(1 for x in target[id(m)] if x[0] == topic))
                target[id(least)].add(tp)
        for member in members:
            gone = member.owned - target[id(member)]
            new = target[id(member)] - member.owned
            if gone:
                member.events.append(("revoke", gone))
            if new:
                member.events.append(("assign", new))
            member.owned = set(target[id(member)])


class FakeConsumer:
    def __init__(self, broker: FakeBroker, config: dict):
        self.broker = broker
        self.group = config["group.id"]
        self.topics: list[str] = []
        self.owned: set[tuple[str, int]] = set()  # what the coordinator gave this member
        self.assigned: set[tuple[str, int]] = set()  # what the callbacks have applied
        self.paused: set[tuple[str, int]] = set()
        self.positions: dict[tuple[str, int], int] = {}
        self.events: deque = deque()
        self.callbacks: dict = {}
        self.closed = False

    def subscribe(self, topics, on_assign=None, on_revoke=None, on_lost=None):
        for topic in topics:
            self.broker.create_topic(topic)
        self.topics = list(topics)
        self.callbacks = {"assign": on_assign, "revoke": on_revoke}
        members = self.broker.members.setdefault(self.group, [])
        if self not in members:
            members.append(self)
        self.broker.rebalance(self.group)

    def _serve_events(self) -> None:
        while self.events:
            kind, tps = self.events.popleft()
            partitions = [TopicPartition(t, p) for t, p in sorted(tps)]
            callback = self.callbacks.get(kind)
            if kind == "revoke":
                if callback:
                    callback(self, partitions)
                self.assigned -= tps
                self.paused -= tps
                for tp in tps:
                    self.positions.pop(tp, None)
            else:
                if callback:
                    callback(self, partitions)
                self.incremental_assign(partitions)

    def incremental_assign(self, partitions):
        for tp in partitions:
            key = (tp.topic, tp.partition)
            if key not in self.assigned:
                self.assigned.add(key)
                committed = self.broker.committed.get((self.group, *key), OFFSET_INVALID)
                self.positions[key] = max(committed, 0)

    def poll(self, timeout=None):
        self._serve_events()
        for key in sorted(self.assigned - self.paused):
            log = self.broker.logs[key[0]][key[1]]
            if self.positions[key] < len(log):
                record = log[self.positions[key]]
                self.positions[key] += 1
                return record
        return None

    def assignment(self):
        return [TopicPartition(t, p) for t, p in sorted(self.assigned)]

    def pause(self, partitions):
        self.paused |= {(tp.topic, tp.partition) for tp in partitions}

    def resume(self, partitions):
        self.paused -= {(tp.topic, tp.partition) for tp in partitions}

    def seek(self, tp):
        self.positions[(tp.topic, tp.partition)] = tp.offset

    def position(self, partitions):
        return [
            TopicPartition(tp.topic, tp.partition, self.positions.get((tp.topic, tp.partition)))
            for tp in partitions
        ]

    def commit(self, offsets=None, asynchronous=True):
        for tp in offsets:
            self.broker.committed[(self.group, tp.topic, tp.partition)] = tp.offset

    def committed(self, partitions, timeout=None):
        return [
            TopicPartition(
                tp.topic,
                tp.partition,
                self.broker.committed.get((self.group, tp.topic, tp.partition), OFFSET_INVALID),
            )
            for tp in partitions
        ]

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        return 0, len(self.broker.logs[tp.topic][tp.partition])

    def close(self):
        if self.closed:
            return
        self.closed = True
        if self.assigned and self.callbacks.get("revoke"):
            self.callbacks["revoke"](self, self.assignment())
        members = self.broker.members.get(self.group, [])
        if self in members:
            members.remove(self)
            self.owned = set()
            self.broker.rebalance(self.group)


class FakeProducer:
    def __init__(self, broker: FakeBroker):
        self.broker = broker
        self.pending: list = []

    def produce(self, topic, value=None, key=None, headers=None, on_delivery=None, partition=None):
        record = self.broker.append(topic, value, key, headers, partition)
        self.pending.append((on_delivery, record))

    def poll(self, timeout=None):
        pending, self.pending = self.pending, []
        for on_delivery, record in pending:
            if on_delivery:
                on_delivery(None, record)
        return len(pending)

    def flush(self, timeout=None):
        self.poll()
        return 0


def _done(value=None) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


class FakeAdmin:
    def __init__(self, broker: FakeBroker):
        self.broker = broker

    def list_topics(self, topic=None, timeout=None):
        names = [topic] if topic else list(self.broker.logs)
        return SimpleNamespace(
            topics={
                name: SimpleNamespace(
                    error=None,
                    partitions={
                        p: SimpleNamespace(leader=0) for p in range(len(self.broker.logs[name]))
                    },
                )
                for name in names
                if name in self.broker.logs
            }
        )

    def create_topics(self, new_topics, operation_timeout=None):
        for new in new_topics:
            self.broker.create_topic(new.topic, new.num_partitions)
        return {new.topic: _done() for new in new_topics}

    def delete_topics(self, topics, operation_timeout=None):
        for topic in topics:
            self.broker.logs.pop(topic, None)
        return {topic: _done() for topic in topics}

    def poll(self, timeout=None):
        return 0


class FakeKafka:
    """`client_factory` for the transport: every client talks to one FakeBroker."""

    def __init__(self, broker: FakeBroker | None = None):
        self.broker = broker or FakeBroker()

    def consumer(self, config: dict) -> FakeConsumer:
        return FakeConsumer(self.broker, config)

    def producer(self, config: dict) -> FakeProducer:
        return FakeProducer(self.broker)

    def admin(self, config: dict) -> FakeAdmin:
        return FakeAdmin(self.broker)
