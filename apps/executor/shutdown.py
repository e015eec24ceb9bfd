"""Graceful shutdown of an executor process (SIGTERM → Celery's warm shutdown).

Celery stops taking new messages and waits for running tasks. We bound that wait: once
JOBWEAVER_SHUTDOWN_GRACE_SECONDS have passed, every attempt still running stops at its next
checkpoint and is *released*: the job goes back to PENDING at once and runs again on another
worker. A released attempt does not count against the job's retry budget: the job did not
fail, the platform took the worker away (the attempt stays in the history, outcome LOST).
"""

from __future__ import annotations

import threading
import time

_lock = threading.Lock()
_deadline: float | None = None


def begin(grace_seconds: float) -> None:
    """The worker received its stop signal: running attempts have `grace_seconds` left."""
    global _deadline
    with _lock:
        if _deadline is None:
            _deadline = time.monotonic() + grace_seconds


def begun() -> bool:
    """The worker received its stop signal: start nothing more."""
    return _deadline is not None


def grace_expired() -> bool:
    deadline = _deadline
    return deadline is not None and time.monotonic() >= deadline


def reset() -> None:
    global _deadline
    with _lock:
        _deadline = None
