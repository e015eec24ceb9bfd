"""An executor process's slots: at most JOBWEAVER_EXECUTOR_CONCURRENCY attempts run at once.

A run-job record may carry several deliveries (apps/scheduler/run_job_message.py). Its Celery
thread takes as many free slots as it has deliveries, up to all that are free, starts that many
in one statement and runs them on the slot threads here (the last one on its own thread). What
finds no free slot waits in this process's line. An attempt holds its slot while its work runs;
a success is handed to the slots' writer thread (`writer`, apps/core/writebehind.py) and the
slot's thread goes on to the next delivery in line at once; the record learns of the success
once it is committed. Any other ending frees the slot when the work is done (the next delivery
goes to another slot thread) while the attempt's thread writes it. So a slot never idles
through a write. Deliveries in the line are "waiting":
the presence thread renews their dispatch lease (apps/executor/presence.py), as it does for
records Celery holds unstarted.

Celery's thread pool has as many threads as there are slots; a record's thread returns once
every delivery it brought has ended. Nothing waits in line while a slot is free (`admit` and
`next_or_give` share a lock), so the line always moves.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import connections

from jobweaver.core.threads import on_each_thread
from jobweaver.core.writebehind import WriteBehind

# How long closing waits for every slot thread to close its connection.
CLOSE_SECONDS = 10.0

_lock = threading.Lock()
_slots: Slots | None = None


class Record:
    """The deliveries one run-job record brought: its thread waits until all have ended."""

    def __init__(self, count: int):
        self._left = count
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self.error: BaseException | None = None  # the first error that ended one
        if count == 0:
            self._ended.set()

    def ended(self, count: int = 1, error: BaseException | None = None) -> None:
        with self._lock:
            if error is not None and self.error is None:
                self.error = error
            self._left -= count
            if self._left <= 0:
                self._ended.set()

    def wait(self) -> None:
        self._ended.wait()


class Slots:
    def __init__(self, count: int):
        self.count = count
        self._free = count
        self._lock = threading.Lock()
        self._line: deque[tuple[Any, Record]] = deque()  # (delivery, its record), in order
        # Twice the slots: a thread writing its attempt's ending has given its slot on already.
        self._threads = ThreadPoolExecutor(
            max_workers=2 * count, thread_name_prefix="jobweaver-slot"
        )
        self._writers: dict[str, WriteBehind] = {}

    def writer(self, name: str, write, max_batch: int) -> WriteBehind:
        """The slots' writer thread of one kind of ending (created at the first call): slots
        hand their successes over to it and go on. It holds a database session of its own
        while busy, and closes it when idle and with the slots."""
        with self._lock:
            writer = self._writers.get(name)
            if writer is None:
                writer = self._writers[name] = WriteBehind(
                    write,
                    max_batch=max_batch,
                    name=f"jobweaver-{name}",
                    on_idle=connections.close_all,
                )
            return writer

    def admit(self, deliveries: list, record: Record) -> list:
        """Take a free slot for each of the first deliveries, as many as are free; the rest wait
        in line. Returns the ones with a slot (the caller starts them now)."""
        with self._lock:
            admitted = min(len(deliveries), self._free) if not self._line else 0
            self._free -= admitted
            self._line.extend((delivery, record) for delivery in deliveries[admitted:])
        return deliveries[:admitted]

    def idle_for(self, count: int) -> bool:
        """Whether `count` deliveries would all find a free slot now (nothing waits in line)."""
        with self._lock:
            return not self._line and self._free >= count

    def next_or_give(self) -> tuple[Any, Record] | None:
        """A thread holding a slot is done with its attempt: the next delivery in line (the
        slot stays taken), or None and the slot is free again. One lock for both, so a
        delivery never waits in line while a slot is free."""
        with self._lock:
            if self._line:
                return self._line.popleft()
            self._free += 1
            return None

    def take_line(self) -> list[tuple[Any, Record]]:
        """Everything waiting in line, which leaves it (the worker is shutting down)."""
        with self._lock:
            line = list(self._line)
            self._line.clear()
            return line

    def take_from_line(self, which) -> list[tuple[Any, Record]]:
        """The deliveries waiting in line for which `which(delivery)` is true, which leave it
        (their queue was paused)."""
        with self._lock:
            taken = [(delivery, record) for delivery, record in self._line if which(delivery)]
            if taken:
                self._line = deque(item for item in self._line if not which(item[0]))
            return taken

    def waiting(self) -> list:
        with self._lock:
            return [delivery for delivery, _ in self._line]

    def run(self, function, *args: Any) -> None:
        """`function(*args)` on a slot thread; the caller has taken its slot for it."""
        self._threads.submit(function, *args)

    def close(self) -> None:
        """Once no attempt runs: every slot thread closes its database connection and ends."""
        on_each_thread(self._threads, 2 * self.count, connections.close_all, CLOSE_SECONDS)
        self._threads.shutdown(wait=True)
        for writer in self._writers.values():  # nothing is queued: no attempt runs
            writer.close()


def slots(count: int) -> Slots:
    """This process's slots (created at the first call, with `count` of them)."""
    global _slots
    with _lock:
        if _slots is None:
            _slots = Slots(count)
        return _slots


def close() -> None:
    """At the worker's shutdown (and after a test): the slot threads end, connections closed."""
    global _slots
    with _lock:
        closing, _slots = _slots, None
    if closing is not None:
        closing.close()


def current() -> Slots | None:
    """This process's slots, if a record created them."""
    return _slots


def waiting() -> list:
    """The deliveries waiting in this process's line for a slot."""
    current = _slots
    return current.waiting() if current is not None else []


# Event ids of the deliveries this process accepted and has neither started nor ended
# (runner._accept): a second copy of one (a duplicate record) is dropped, as only the first
# copy may run before its start is written.
_accepted: set = set()


def accepted_first(event_ids: list) -> list[bool]:
    """For each event id in order: True if this process holds no accepted copy of it yet (it
    holds one now), False for a copy of one it holds."""
    firsts = []
    with _lock:
        for event_id in event_ids:
            firsts.append(event_id not in _accepted)
            _accepted.add(event_id)
    return firsts


def accepted_done(event_id) -> None:
    """The accepted delivery was started, ended or given back: a later copy meets the fence."""
    with _lock:
        _accepted.discard(event_id)


# The attempts running before their start was written (runner.AttemptRunner), by event id:
# their deliveries are still DISPATCHED, so the presence thread renews their leases, and a pause
# of their queue has them write their start at once.
_unstarted: dict = {}


def unstarted_add(event_id, attempt) -> None:
    with _lock:
        _unstarted[event_id] = attempt


def unstarted_discard(event_id) -> None:
    with _lock:
        _unstarted.pop(event_id, None)


def unstarted() -> list:
    """The event ids of the attempts running before their start was written."""
    with _lock:
        return list(_unstarted)


def unstarted_attempts() -> list:
    with _lock:
        return list(_unstarted.values())
