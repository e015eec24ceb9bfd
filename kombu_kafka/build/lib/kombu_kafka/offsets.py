"""Per-partition in-flight tracking and a contiguous commit watermark (pure, no Kafka client).

Kafka commits one offset per partition: "everything before this is done". Work finishes out of
order (several threads, retries), so the committed offset may only advance over a contiguous
run of finished messages, never past one still in flight. This is the seed's `PartitionState`
and `OffsetCommitCoordinator`, and the model of Sentry's arroyo.

    tracker = OffsetTracker()
    tracker.assign([("run-job", 0)])
    tracker.delivered("run-job", 0, 10); tracker.delivered("run-job", 0, 11)
    tracker.done("run-job", 0, 11)      # nothing committable: 10 is still in flight
    tracker.done("run-job", 0, 10)
    tracker.committable()               # {("run-job", 0): 12}  (offset + 1, Kafka's convention)

Thread-safety: `delivered`, `assign`, `revoke`, `committable` and `mark_committed` are called
by the consumer's thread; `done` may come from worker threads. One lock guards everything.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

TopicPartitionKey = tuple[str, int]


class PartitionState:
    """Offsets of one partition delivered to this process, in delivery order, and which of
    them are done. `watermark` is the next offset to commit (last contiguous done + 1)."""

    def __init__(self) -> None:
        self._in_flight: deque[int] = deque()
        self._done: set[int] = set()
        self.watermark: int | None = None

    def delivered(self, offset: int) -> None:
        if self._in_flight and offset <= self._in_flight[-1]:
            # The broker went back (a seek or a re-fetch after an error): whatever we held
            # above `offset` will be delivered again, so restart tracking from here.
            self._in_flight.clear()
            self._done.clear()
        self._in_flight.append(offset)

    def done(self, offset: int) -> bool:
        """Mark an offset finished; True when the watermark moved."""
        if offset not in self._in_flight or offset in self._done:
            return False
        self._done.add(offset)
        moved = False
        while self._in_flight and self._in_flight[0] in self._done:
            finished = self._in_flight.popleft()
            self._done.discard(finished)
            self.watermark = finished + 1
            moved = True
        return moved

    @property
    def in_flight(self) -> int:
        return len(self._in_flight) - len(self._done)


@dataclass
class CommitPolicy:
    """Commit when this many messages finished since the last commit, or this much time
    passed with something to commit. Shutdown and revoke commit regardless."""

    max_messages: int = 200
    max_interval_seconds: float = 0.5


@dataclass
class OffsetTracker:
    policy: CommitPolicy = field(default_factory=CommitPolicy)
    _partitions: dict[TopicPartitionKey, PartitionState] = field(default_factory=dict)
    _committed: dict[TopicPartitionKey, int] = field(default_factory=dict)
    _finished_since_commit: int = 0
    _last_commit: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def assign(self, partitions: list[TopicPartitionKey]) -> None:
        with self._lock:
            for key in partitions:
                self._partitions[key] = PartitionState()
                self._committed.pop(key, None)

    def revoke(self, partitions: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Drop the partitions' in-flight state; returns their last committable offsets."""
        with self._lock:
            final = {}
            for key in partitions:
                state = self._partitions.pop(key, None)
                committed = self._committed.pop(key, None)
                if (
                    state is not None
                    and state.watermark is not None
                    and (committed is None or state.watermark > committed)
                ):
                    final[key] = state.watermark
            return final

    def delivered(self, topic: str, partition: int, offset: int) -> None:
        with self._lock:
            state = self._partitions.get((topic, partition))
            if state is None:  # delivered before the assign callback ran (should not happen)
                state = self._partitions[(topic, partition)] = PartitionState()
            state.delivered(offset)

    def done(self, topic: str, partition: int, offset: int) -> None:
        """The message finished (acked or rejected). A partition revoked meanwhile is ignored:
        its new owner re-reads from the last commit."""
        with self._lock:
            state = self._partitions.get((topic, partition))
            if state is not None and state.done(offset):
                self._finished_since_commit += 1

    def should_commit(self, now: float | None = None) -> bool:
        with self._lock:
            if not self._finished_since_commit:
                return False
            now = time.monotonic() if now is None else now
            return (
                self._finished_since_commit >= self.policy.max_messages
                or now - self._last_commit >= self.policy.max_interval_seconds
            )

    def committable(self) -> dict[TopicPartitionKey, int]:
        """Offsets to commit now: partitions whose watermark moved past the last commit."""
        with self._lock:
            return {
                key: state.watermark
                for key, state in self._partitions.items()
                if state.watermark is not None
                and (key not in self._committed or state.watermark > self._committed[key])
            }

    def mark_committed(self, offsets: dict[TopicPartitionKey, int]) -> None:
        with self._lock:
            for key, offset in offsets.items():
                if key in self._partitions:
                    self._committed[key] = max(offset, self._committed.get(key, offset))
            self._finished_since_commit = 0
            self._last_commit = time.monotonic()

    def partitions(self, topic: str) -> list[int]:
        """Partitions of `topic` assigned to this consumer now."""
        with self._lock:
            return sorted(p for t, p in self._partitions if t == topic)

    def in_flight(self) -> int:
        with self._lock:
            return sum(state.in_flight for state in self._partitions.values())
