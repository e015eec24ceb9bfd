"""Riding out short database outages (a PostgreSQL restart, a failover) in worker code."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connection

logger = logging.getLogger(__name__)

T = TypeVar("T")
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)


def retry_while_database_unavailable(fn: Callable[[], T], *, what: str, timeout: float) -> T:
    """Call `fn` (a whole transaction: it must be safe to run again after a rollback) until it
    gets through, for up to `timeout` seconds, reconnecting between tries with backoff."""
    deadline = time.monotonic() + timeout
    delay = 0.1
    while True:
        try:
            return fn()
        except DATABASE_UNAVAILABLE as exc:
            if time.monotonic() + delay > deadline:
                raise
            logger.warning("%s: database unavailable (%s); retrying in %.1f s", what, exc, delay)
            connection.close()  # this thread's broken connection; the next query reconnects
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
