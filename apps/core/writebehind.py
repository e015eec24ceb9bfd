"""Write-behind: many threads' writes of one kind in one statement, written by a thread of its own.

`submit(item, done)` queues the item and returns at once. The writer thread takes the items
waiting (at most `max_batch`), writes them with one call, and then calls each item's
`done(result, error)` on its own thread. A lone item is written as soon as the writer wakes (no
timer); under load the batch holds what arrived during the previous write, as in the group
commit (apps/core/groupcommit.py).

The difference from the group commit: there nobody goes on before its write returned, and the
caller may become the writer. Here the caller never waits. An executor's slot hands its job's
success over and runs the next job in line at once; the record that brought the job is
acknowledged from `done`, after the commit (issue 34: a slot's thread waiting for the
success's statement was the executor's bound, bench/NOTES.md).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")
Done = Callable[[Result | None, BaseException | None], None]

logger = logging.getLogger(__name__)


class WriteBehind(Generic[Item, Result]):
    """`write(items)` returns one result per item, in their order; it runs on the writer thread
    (its database connection, if it uses one). `on_idle` runs on that thread after
    `idle_seconds` without items and when the writer closes (a database session not held
    idle)."""

    def __init__(
        self,
        write: Callable[[list[Item]], Sequence[Result]],
        *,
        max_batch: int,
        name: str,
        idle_seconds: float = 5.0,
        on_idle: Callable[[], None] = lambda: None,
    ):
        assert max_batch >= 1
        self._write = write
        self._max_batch = max_batch
        self._name = name
        self._idle_seconds = idle_seconds
        self._on_idle = on_idle
        self._ready = threading.Condition()
        self._queue: deque[tuple[Item, Done]] = deque()
        self._thread: threading.Thread | None = None
        self._closing = False
        self.writes = 0  # how many writes, and of how many items: for tests and benchmarks
        self.items = 0

    def submit(self, item: Item, done: Done) -> None:
        """Queue `item`; `done(result, None)` or `done(None, error)` follows on the writer's
        thread once its write returned or raised."""
        with self._ready:
            if self._closing:
                raise RuntimeError(f"{self._name} is closed")
            self._queue.append((item, done))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._ready.notify()

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued, then end the writer thread (after its `on_idle`)."""
        with self._ready:
            self._closing = True
            thread = self._thread
            self._ready.notify()
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._ready:
                idle = False
                while not self._queue and not self._closing and not idle:
                    idle = not self._ready.wait(self._idle_seconds)
                batch = [
                    self._queue.popleft() for _ in range(min(len(self._queue), self._max_batch))
                ]
                closing = self._closing and not batch
            if not batch:
                self._on_idle()
                if closing:
                    return
                continue
            self._write_batch(batch)

    def _write_batch(self, batch: list[tuple[Item, Done]]) -> None:
        results: Sequence[Result | None]
        error: BaseException | None = None
        try:
            results = self._write([item for item, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"write returned {len(results)} results for {len(batch)}")
        except BaseException as failed:  # noqa: BLE001 - each item's done receives it
            error, results = failed, [None] * len(batch)
        self.writes += 1
        self.items += len(batch)
        for (_, done), result in zip(batch, results, strict=True):
            try:
                done(result, error)
            except Exception:  # one caller's callback must not cost the others theirs
                logger.exception("%s: a write's callback failed", self._name)
