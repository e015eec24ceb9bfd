"""A call once on each thread of a pool: what belongs to a thread (a database connection) is
opened or closed by that thread."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, wait


def on_each_thread(
    pool: Executor, threads: int, call: Callable[[], object], timeout: float
) -> list[BaseException]:
    """`call` on each of the `threads` threads of `pool` (started now if they were not),
    waiting at most `timeout` seconds; returns the errors it raised. Each run first waits for
    the others at a barrier, so each runs on a thread of its own: an idle thread would
    otherwise take the next one. Too slow a start breaks the barrier: the runs go on anyway,
    and a thread may then run `call` twice while another does not."""
    deadline = time.monotonic() + timeout
    together = threading.Barrier(threads)

    def once() -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            together.wait(max(deadline - time.monotonic(), 0))
        call()

    futures = [pool.submit(once) for _ in range(threads)]
    done, _ = wait(futures, max(deadline - time.monotonic(), 0))
    return [future.exception() for future in done if future.exception() is not None]
