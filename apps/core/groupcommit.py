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
    __slots__ = ("done", "error", "item", "result")

    def __init__(self, item):
        self.item = item
        self.done = False
        self.result = None
        self.error: BaseException | None = None


class GroupCommit(Generic[Item, Result]):
    """`write(items)` returns one result per item, in their order; it runs in the thread of
    whichever caller became the writer (its database connection, if it uses one)."""

    def __init__(self, write: Callable[[list[Item]], Sequence[Result]], *, max_batch: int):
        assert max_batch >= 1
        self._write = write
        self._max_batch = max_batch
        self._cond = threading.Condition()
        self._queue: list[_Waiter] = []
        self._writing = False
        self.writes = 0  # how many writes, and of how many items: for tests and benchmarks
        self.items = 0

    def submit(self, item: Item) -> Result:
        waiter = _Waiter(item)
        with self._cond:
            self._queue.append(waiter)
        while True:
            with self._cond:
                while self._writing and not waiter.done:
                    self._cond.wait()
                if waiter.done:
                    break
                # No write in progress and ours not written: this thread writes the next batch
                # (ours is in it unless more than a batch waited before it; then it loops).
                self._writing = True
                batch = self._queue[: self._max_batch]
                del self._queue[: self._max_batch]
            self._write_batch(batch)
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
            with self._cond:
                for waiter in batch:
                    if not written and waiter.error is None:  # interrupted (SystemExit, …)
                        waiter.error = RuntimeError("the write of this batch was interrupted")
                    waiter.done = True
                self._writing = False
                self.writes += 1
                self.items += len(batch)
                self._cond.notify_all()
