"""The executor's process pool (`--pool processes`, ARCHITECTURE §13a): the mechanics of its
children. What an attempt does with a child — waiting, stopping, killing, recording — is
`PooledRunner`'s (apps/executor/runners.py).

Why children, and why this way. A thread cannot be killed, so a task that never returns holds
its slot until the process restarts, a segfault takes every attempt of the process with it, and
CPU-bound tasks share one core under the GIL. A child process can be killed and replaced.
librdkafka's threads do not survive `fork`, so children are started by `forkserver` (the
forkserver preloads Django once, pool_preload.py, so a new child is ready in milliseconds) or
`spawn` where there is no forkserver; never by forking the executor. The parent keeps the
Kafka consumer, the lease, the heartbeats and every write; a child only runs work.

One child per slot: Celery's threads pool (one thread per slot) still takes the deliveries,
and each attempt's thread borrows an idle child for the attempt.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import queue
import threading

from jobweaver.executor.pool_child import Finished, Progress, Work, child_main

logger = logging.getLogger(__name__)

PRELOAD = "jobweaver.executor.pool_preload"
KILL_WAIT_SECONDS = 5.0

# A forkserver child's exit status is one value on its sentinel pipe: of two threads that read
# it at once, the loser finds the pipe empty and takes 255 for it. `Process.start()` reads every
# earlier child's (multiprocessing's _cleanup), so a start in one thread raced a reaper's join in
# another. Every start and every read of an exit status holds this lock; waiting for an exit
# watches the sentinel outside it (watching reads nothing).
_exit_status = threading.Lock()


class ChildDied(Exception):
    """The child ended while it ran an attempt (a segfault, an OOM kill, `os._exit`)."""

    def __init__(self, exitcode: int | None):
        super().__init__(f"worker process died (exit code {exitcode})")
        self.exitcode = exitcode


class Child:
    """One child process and the pipe and stop event it shares with the parent."""

    def __init__(self, context, number: int):
        self.channel, child_end = context.Pipe()
        self.stop = context.Event()
        self.process = context.Process(
            target=child_main, args=(child_end, self.stop), name=f"pool-child-{number}"
        )
        self.process.daemon = True  # the parent's exit ends it
        with _exit_status:
            self.process.start()
        child_end.close()
        self.attempts = 0
        self.max_rss_kb = 0
        self.broken = False  # killed or dead: never used again

    def begin(self, work: Work) -> None:
        self.stop.clear()  # only the parent sets and clears it, between attempts
        self.channel.send(work)

    def receive(self, timeout: float) -> list[Progress | Finished]:
        """What the child sent within `timeout` (nothing, progress, its Finished last)."""
        messages: list[Progress | Finished] = []
        try:
            if self.channel.poll(timeout):
                while True:
                    message = self.channel.recv()
                    messages.append(message)
                    if isinstance(message, Finished):
                        self.attempts += 1
                        self.max_rss_kb = message.max_rss_kb
                        break
                    if not self.channel.poll(0):
                        break
        except (EOFError, OSError):
            self.broken = True
            raise ChildDied(self.wait_exit(KILL_WAIT_SECONDS)) from None
        return messages

    def ask_to_stop(self) -> None:
        self.stop.set()

    def kill(self) -> None:
        self.broken = True
        self.process.kill()
        self.wait_exit(KILL_WAIT_SECONDS)

    def is_alive(self) -> bool:
        return self.exit_status() is None

    def exit_status(self) -> int | None:
        """The child's exit code, or None while it runs (a read under `_exit_status`)."""
        with _exit_status:
            return self.process.exitcode

    def wait_exit(self, timeout: float | None) -> int | None:
        """Wait up to `timeout` seconds (None: for ever) for the child to exit; its exit code,
        or None if it still runs."""
        multiprocessing.connection.wait([self.process.sentinel], timeout)
        return self.exit_status()

    def retire(self, *, wait: bool = False) -> None:
        """Ask an idle child to exit (it ends after its current recv) and reap it: now, or in
        a thread of its own when `wait` is false."""
        with contextlib.suppress(OSError):
            self.channel.send(None)
        self.channel.close()
        if wait:
            self.wait_exit(KILL_WAIT_SECONDS)
        else:
            self.reaper = threading.Thread(
                target=self.wait_exit, args=(None,), name="pool-reaper", daemon=True
            )
            self.reaper.start()

    def exit_code(self, timeout: float) -> int | None:
        """A retired child's exit code, once it exited (None: not within `timeout`)."""
        return self.wait_exit(timeout)


class ProcessPool:
    """`size` children, each lent to one attempt at a time, replaced when killed, dead, or
    past `max_tasks` attempts or `max_memory_mb` of peak memory (0: no limit)."""

    def __init__(self, size: int, *, max_tasks: int = 0, max_memory_mb: int = 0):
        methods = multiprocessing.get_all_start_methods()
        self.start_method = "forkserver" if "forkserver" in methods else "spawn"
        self.context = multiprocessing.get_context(self.start_method)
        if self.start_method == "forkserver":
            self.context.set_forkserver_preload([PRELOAD])
        self.size, self.max_tasks, self.max_memory_mb = size, max_tasks, max_memory_mb
        self.idle: queue.SimpleQueue[Child] = queue.SimpleQueue()
        self.started = 0
        self._lock = threading.Lock()
        self.closed = False

    def start(self) -> None:
        for _ in range(self.size):
            self.idle.put(self._new_child())
        logger.info("process pool: %d children started by %s", self.size, self.start_method)

    def _new_child(self) -> Child:
        with self._lock:
            self.started += 1
            number = self.started
        return Child(self.context, number)

    def acquire(self) -> Child:
        """An idle child. Celery runs at most `size` attempts at once, so one is always idle
        or being replaced."""
        return self.idle.get()

    def release(self, child: Child) -> None:
        """Give the child back after its attempt; a broken or worn-out one is replaced first,
        so the next attempt starts at once."""
        if self.closed:  # an attempt that ended after the shutdown began
            child.retire(wait=True)
            return
        worn = (self.max_tasks and child.attempts >= self.max_tasks) or (
            self.max_memory_mb and child.max_rss_kb > self.max_memory_mb * 1024
        )
        if child.broken or not child.is_alive() or worn:
            if not child.broken:
                child.retire()
                logger.info(
                    "process pool: child %s retired after %d attempts, %d MB peak",
                    child.process.pid,
                    child.attempts,
                    child.max_rss_kb // 1024,
                )
            child = self._new_child()
        self.idle.put(child)

    def close(self) -> None:
        """Retire the idle children and wait for them (the graceful shutdown waited for the
        busy ones); one that does not exit in time is killed."""
        self.closed = True
        while True:
            try:
                child = self.idle.get_nowait()
            except queue.Empty:
                return
            child.retire(wait=True)
            if child.is_alive():
                child.kill()


_pool: ProcessPool | None = None


def pool_start(size: int, *, max_tasks: int = 0, max_memory_mb: int = 0) -> ProcessPool:
    """Start this executor's pool (once, before it consumes)."""
    global _pool
    if _pool is None:
        _pool = ProcessPool(size, max_tasks=max_tasks, max_memory_mb=max_memory_mb)
        _pool.start()
    return _pool


def current_pool() -> ProcessPool | None:
    """The running pool, or None under the threads pool."""
    return _pool


def pool_close() -> None:
    if _pool is not None:
        _pool.close()
