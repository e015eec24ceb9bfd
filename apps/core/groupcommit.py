"""Group commit: many threads' writes of one kind in one statement, without a timer.

Each thread hands its item to `GroupCommit.submit` and waits for its own result. A thread that
finds no write in progress becomes the writer: it takes the items waiting (at most
`max_batch`), writes them with one call, hands each waiting thread its result, and leaves. Items
that arrive meanwhile wait for the next write. So an idle process writes its one item at once
(no batching delay on the idle path), and a busy one writes as many items per statement as
arrived during the previous write — the batch grows with the load, like PostgreSQL's own group
commit of WAL.

`submit` returns only after the write that held its item returned: a caller that acknowledges
work afterwards (a Kafka delivery) acknowledges committed work only. An exception of the write
is raised in every thread whose item it held.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


class _Waiter:
    """One item and its thread: the thread sleeps on its own lock until the write that held its
    item is done, or until it is handed the writer's part."""

    __slots__ = ("_wake", "done", "error", "item", "leads", "result")

    def __init__(self, item):
        self.item = item
        self.done = False
        self.leads = False
        self.result = None
        self.error: BaseException | None = None
        self._wake = threading.Lock()
        self._wake.acquire()

    def sleep(self) -> None:
        self._wake.acquire()

    def wake(self) -> None:
        self._wake.release()


class GroupCommit(Generic[Item, Result]):
    """`write(items)` returns one result per item, in their order; it runs in the thread of
    whichever caller became the writer (its database connection, if it uses one).

    Only the threads a write concerns are woken: each item's own thread when its result is
    in, and the first waiting thread when the writer hands its part on. A wake-up of every
    waiting thread after every write cost the executor a tenth of its CPU (bench/NOTES.md)."""

    def __init__(self, write: Callable[[list[Item]], Sequence[Result]], *, max_batch: int):
        assert max_batch >= 1
        self._write = write
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._queue: list[_Waiter] = []
        self._writing = False
        self.writes = 0  # how many writes, and of how many items: for tests and benchmarks
        self.items = 0

    def submit(self, item: Item) -> Result:
        waiter = _Waiter(item)
        with self._lock:
            self._queue.append(waiter)
            waiter.leads = not self._writing
            self._writing = True
        if not waiter.leads:
            waiter.sleep()  # until written by another thread, or handed the writer's part
        while not waiter.done:
            # The writer: the next batch, ours in it unless more than a batch waited before it.
            with self._lock:
                batch = self._queue[: self._max_batch]
                del self._queue[: self._max_batch]
            self._write_batch(batch)
            for other in batch:
                if other is not waiter:
                    other.wake()
            with self._lock:
                following = self._queue[0] if self._queue else None
                if following is None:
                    self._writing = False
            if waiter.done and following is not None:
                following.leads = True  # the writer's part goes on to the first waiting
                following.wake()
        if waiter.error is not None:
            raise waiter.error
        return waiter.result

    def _write_batch(self, batch: list[_Waiter]) -> None:
        written = False
        try:
            results = self._write([waiter.item for waiter in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"write returned {len(results)} results for {len(batch)}")
            for waiter, result in zip(batch, results, strict=True):
                waiter.result = result
            written = True
        except Exception as error:  # noqa: BLE001 - each waiting thread raises it as its own
            for waiter in batch:
                waiter.error = error
        finally:
            for waiter in batch:
                if not written and waiter.error is None:  # interrupted (SystemExit, …)
                    waiter.error = RuntimeError("the write of this batch was interrupted")
                waiter.done = True
            with self._lock:
                self.writes += 1
                self.items += len(batch)
