"""Example Python tasks (ARCHITECTURE §13, §13a): ordinary functions declared with JobWeaver's
`task` (DEP 14's, plus JobWeaver's options), run with retries, leases, cancellation and history.
Used by the README's quick start, the docs and the tests:

    >>> from jobweaver_site.examples.tasks import add
    >>> result = add.enqueue(2, 3)
    >>> add.get_result(result.id).return_value   # once an executor ran it
    5
"""

from __future__ import annotations

import asyncio
import os
import time

from jobweaver.jobs.python_tasks.context import JobWeaverTaskContext
from jobweaver.tasks import NonRetryableError, periodic, task

SLICE_SECONDS = 0.05
# spin() and fib() hold a slot with no way to stop them but a kill: bounded, so a submitter
# cannot take an executor's slot for long.
SPIN_MAX_SECONDS = 60
FIB_MAX_N = 35


@task
def add(a: float, b: float) -> float:
    """Return a + b."""
    return a + b


@task(takes_context=True)
def flaky(context: JobWeaverTaskContext, fail_times: int) -> str:
    """Raise on attempts 1 … fail_times, then return "ok" (shows retries with backoff)."""
    if context.attempt <= fail_times:
        raise RuntimeError(f"flaky: attempt {context.attempt} of {fail_times} failing on purpose")
    return "ok"


@task
def always_fails(message: str = "always fails") -> None:
    """Raise every time: the job dead-letters once its retries are used up."""
    raise RuntimeError(message)


@task(takes_context=True)
def sleep(context: JobWeaverTaskContext, seconds: float) -> float:
    """Sleep cooperatively: report progress in whole seconds and stop soon after the job is
    cancelled (or its attempt ends otherwise). Returns the seconds actually slept."""
    started = time.monotonic()
    total = max(1, round(seconds))
    reported = -1
    while (elapsed := time.monotonic() - started) < seconds:
        if context.is_cancelled():
            break
        if int(elapsed) != reported:
            reported = int(elapsed)
            context.report_progress(reported, total)
        time.sleep(min(SLICE_SECONDS, seconds - elapsed))
    else:
        context.report_progress(total, total)
    return round(time.monotonic() - started, 3)


@task(retry_on=(ConnectionError,))
def picky(kind: str) -> str:
    """Retried only for what may pass on a second try: kind "connection" raises
    ConnectionError (retried), "value" raises ValueError (dead-letters at once)."""
    if kind == "connection":
        raise ConnectionError("picky: the other side did not answer")
    if kind == "value":
        raise ValueError(f"picky: {kind!r} will never work")
    return kind


@task(takes_context=True)
def snoozer(context: JobWeaverTaskContext, times: int) -> int:
    """Snooze 0.2 s `times` times (no retry used), then return how many attempts it saw."""
    if context.attempt <= times:
        context.snooze(0.2)
    return context.attempt


@task
async def async_add(a: float, b: float) -> float:
    """An `async def` task: runs on the executor's event loop and returns a + b."""
    await asyncio.sleep(0)
    return a + b


@task
async def async_sleep(seconds: float) -> float:
    """Await asyncio.sleep(seconds): a cancel or a timeout cancels it at once."""
    await asyncio.sleep(seconds)
    return seconds


@task
def spin(seconds: float) -> int:
    """Busy-loop for `seconds` (at most 60) without ever looking at cancellation: only the
    process pool's hard timeout stops it early. Returns the loops it made."""
    if not 0 <= seconds <= SPIN_MAX_SECONDS:
        raise NonRetryableError(f"spin: seconds is 0 to {SPIN_MAX_SECONDS}, not {seconds}")
    deadline, loops = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        loops += 1
    return loops


@task
def fib(n: int) -> int:
    """The naive exponential recursion: CPU-bound Python (fib(30) takes a few tenths of a
    second), to compare the threads pool with the process pool. n is at most 35."""
    if not 0 <= n <= FIB_MAX_N:
        raise NonRetryableError(f"fib: n is 0 to {FIB_MAX_N}, not {n}")
    return _fib(n)


def _fib(n: int) -> int:
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


@task
def crash() -> None:
    """Inside a process-pool child, end that process at once (os._exit): its attempt fails
    "worker process died" and the executor stays up. Anywhere else, raise RuntimeError — an
    executor's own process is never ended by a task."""
    if os.environ.get("JOBWEAVER_POOL_CHILD") == "1":
        os._exit(1)
    raise RuntimeError("crash: not in a process-pool child, so only this attempt fails")


@task(takes_context=True)
def sum_parents(context: JobWeaverTaskContext) -> float:
    """In a workflow: the sum of the return values of the jobs it depends on (§16)."""
    return sum(value for value in context.parent_results.values() if value is not None)


@task
def sum_list(values: list[float]) -> float:
    """The sum of a list: a chord's callback gets its group's values as one."""
    return sum(values)


@periodic(cron="0 3 * * *", timezone="UTC")
@task
def nightly_digest() -> str:
    """A schedule deployed with the code: runs every night at 03:00 UTC."""
    return "digest sent"
