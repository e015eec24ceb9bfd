"""Example Python tasks (ARCHITECTURE §13): ordinary functions with Django's `@task`, run by
JobWeaver with retries, leases, cancellation and history. Used by the README's quick start:

    >>> from jobweaver_site.examples.tasks import add
    >>> result = add.enqueue(2, 3)
    >>> add.get_result(result.id).return_value   # once an executor ran it
    5
"""

from __future__ import annotations

import time

from jobweaver.jobs.python_tasks.compat import task
from jobweaver.jobs.python_tasks.context import JobWeaverTaskContext

SLICE_SECONDS = 0.05


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
