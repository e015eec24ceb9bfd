"""An executor process's slots: at most JOBWEAVER_EXECUTOR_CONCURRENCY attempts run at once.

A run-job record may carry several deliveries (apps/scheduler/run_job_message.py). Its Celery
thread takes as many free slots as it has deliveries, up to all that are free, starts that many
in one statement and runs them: the last one on its own thread, the others on the slot
threads here. Deliveries not started yet are "waiting": the presence thread renews their
dispatch lease (apps/executor/presence.py), as it does for records Celery holds unstarted.

Celery's thread pool has as many threads as there are slots. That is enough: a record's thread
holds at least one slot until its last attempt ended, or waits for one while all are taken.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from django.db import connections

_lock = threading.Lock()
_slots: Slots | None = None
_waiting: set[str] = set()  # event ids of deliveries received but not started


class Slots:
    def __init__(self, count: int):
        self.count = count
        self._free = count
        self._freed = threading.Condition(threading.Lock())
        self._threads = ThreadPoolExecutor(max_workers=count, thread_name_prefix="jobweaver-slot")

    def take(self, wanted: int) -> int:
        """Wait for a free slot; take up to `wanted` of the free ones. Returns how many."""
        with self._freed:
            while self._free <= 0:
                self._freed.wait()
            taken = min(wanted, self._free)
            self._free -= taken
            return taken

    def give(self, count: int = 1) -> None:
        with self._freed:
            self._free += count
            self._freed.notify(count)

    def run(self, function, *args: Any) -> Future:
        """`function(*args)` on a slot thread; the caller has taken its slot."""
        return self._threads.submit(function, *args)

    def close(self) -> None:
        """Once no attempt runs: every slot thread closes its database connection and ends."""
        everyone = threading.Barrier(self.count)  # holds each task on a thread of its own

        def close_connection() -> None:
            everyone.wait(timeout=10)
            connections.close_all()

        for _ in range(self.count):
            self._threads.submit(close_connection)
        self._threads.shutdown(wait=True)


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


def wait_for(event_ids: list[str]) -> None:
    with _lock:
        _waiting.update(event_ids)


def started(event_ids: list[str]) -> None:
    with _lock:
        _waiting.difference_update(event_ids)


def waiting() -> list[str]:
    """Event ids of deliveries this process holds in its running records, not started yet."""
    with _lock:
        return list(_waiting)
