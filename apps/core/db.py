"""Database helpers shared by the apps: riding out short outages (a PostgreSQL restart, a
failover) in worker code, the database clock, batched draining, transaction guards."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from django.db import InterfaceError, OperationalError, connection
from django.db.models import DateTimeField, Func

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


class DatabaseNow(Func):
    """`clock_timestamp()`: the database server's clock, the one clock of the system.

    Leases, due times and liveness are computed and compared in SQL with this expression, never
    with a process's wall clock, so a worker whose clock is off behaves like one that is not.
    (`now()` would be the start of the transaction; this is the time the row is evaluated.)
    """

    template = "clock_timestamp()"
    output_field = DateTimeField()


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)


def drain_in_batches(claim_batch: Callable[[], list[T]], batch_size: int) -> list[T]:
    """Run `claim_batch` (one transaction each) until a batch comes back short; all results."""
    claimed: list[T] = []
    while True:
        batch = claim_batch()
        claimed.extend(batch)
        if len(batch) < batch_size:
            return claimed


def assert_in_transaction(what: str) -> None:
    """Guard of functions that must run inside their caller's transaction (they take row locks
    whose effect must commit together with the caller's other writes)."""
    if not connection.in_atomic_block:
        raise RuntimeError(f"{what} must run inside the caller's transaction")
