"""The scheduler worker's wake-up: dispatch as soon as a credit frees up (ARCHITECTURE §4a).

Transactions that free a credit (an execution leaves DISPATCHED or RUNNING) or add capacity (an
executor joins) send `NOTIFY jobweaver_dispatch`, delivered when they commit. One daemon thread
in the scheduler worker LISTENs on its own connection and runs a dispatch per wake-up, folding
the next few notifications into it (FOLD_*): executors never dispatch themselves, so
PostgreSQL sees one dispatcher per scheduler, not one per executor thread.

Work also falls due by itself (a `runAt`, a retry's backoff): between notifications the thread
sleeps until the earliest waiting `next_run_at` (at most a second), so such a job is sent when
it is due, not at the next beat tick. When due work waits only for credits, it sleeps until a
credit frees (or a second passes) instead of polling.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg
from django.db import connection

from jobweaver.conf import settings
from jobweaver.core.db import listen_connection
from jobweaver.engine.claim import DISPATCH_CHANNEL
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.flow import live_window
from jobweaver.scheduler.models import PENDING_DUE_ROWS, JobExecution

logger = logging.getLogger(__name__)

RECONNECT_SECONDS = 1.0
# The longest the thread sleeps without a notification (a second safety tick, beat aside), and
# the shortest, so an overdue job cannot make it spin.
MAX_WAIT_SECONDS = 1.0
MIN_WAIT_SECONDS = 0.005
# Under load attempts keep ending and freeing credits. A dispatch per freed credit claimed only
# a couple of jobs, each paying a dispatch's fixed cost; a notification now waits up to
# FOLD_SECONDS for half the live executors' window in credits (ARCHITECTURE §4a: slots x
# prefetch), and one dispatch refills them together: fewer claims, less scheduler and database
# CPU (bench/NOTES.md). Half, because the executors still hold the other half meanwhile, and so
# a small executor (one slot, a window of 2) never waits on the fold. A notification's payload
# says how many credits its statement freed (an executor's batched successes free several at
# once, and dispatch at once when they are enough); an empty one counts one. Any notification
# (a pause lifted, an executor joining) waits at most FOLD_SECONDS more. A quiet stack is
# unaffected: a submitted job is dispatched by the submit itself.
FOLD_SECONDS = 0.006
# How often the window (the live executors' slots) is read again while notifications come.
WINDOW_TTL_SECONDS = 1.0


def fold_credits(window: int) -> int:
    """Pure: how many freed credits a dispatch waits for (at most FOLD_SECONDS), for a window
    of `window` credits in all: half of it, at least one and at most a dispatch batch."""
    return max(1, min(window // 2, settings.JOBWEAVER_DISPATCH_BATCH_SIZE))


def _credits(notification) -> int:
    """The credits a notification reports freed (its payload; an empty one: one)."""
    return int(notification.payload) if notification.payload.isdigit() else 1


class WakeUp(threading.Thread):
    def __init__(self):
        super().__init__(name="jobweaver-wakeup", daemon=True)
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                with listen_connection() as listener:
                    listener.execute(f"LISTEN {DISPATCH_CHANNEL}")
                    starved = not self._dispatch()  # what freed up while we were not listening
                    due = _NextDue(listener)
                    window = _Window(listener)
                    while not self.stopping.is_set():
                        until_due = due.seconds()
                        wait = MAX_WAIT_SECONDS
                        if until_due is not None and not starved:
                            wait = min(max(until_due, MIN_WAIT_SECONDS), MAX_WAIT_SECONDS)
                        freed = sum(
                            _credits(n) for n in listener.notifies(timeout=wait, stop_after=1)
                        )
                        if freed:
                            # Fold the next few credits into the same dispatch (see FOLD_*).
                            deadline = time.monotonic() + FOLD_SECONDS
                            fold = fold_credits(window.credits())
                            while freed < fold:
                                left = deadline - time.monotonic()
                                if left <= 0:
                                    break
                                freed += sum(
                                    _credits(n)
                                    for n in listener.notifies(timeout=left, stop_after=1)
                                )
                        else:
                            due.forget()  # a quiet moment: read them afresh
                            window.forget()
                        sent = self._dispatch()
                        # Due work left behind means no credit is free: wait for one.
                        starved = not sent and until_due is not None and until_due <= wait
            except psycopg.Error as exc:
                logger.warning("dispatch wake-up listener lost its connection: %s", exc)
                self.stopping.wait(RECONNECT_SECONDS)

    def _dispatch(self) -> bool:
        """One dispatch; True when it sent something."""
        try:
            return bool(dispatch_due_jobs())
        except Exception:  # the beat tick is the safety net; logged with its traceback
            logger.warning("dispatch after a wake-up failed", exc_info=True)
            connection.close()
            return False


# How long the earliest due time, once read, is trusted while notifications keep coming.
NEXT_DUE_TTL_SECONDS = 0.1


class _NextDue:
    """`seconds_until_due`, read at most every NEXT_DUE_TTL_SECONDS while the thread is woken
    by notifications (under load, several times per millisecond of work), and always after a
    wait that timed out. It only bounds how long the thread sleeps without a notification: a
    job submitted with a near `runAt` after the last read is sent when the next notification
    or tick comes, at most MAX_WAIT_SECONDS later, as one submitted during a wait always was."""

    def __init__(self, listener: psycopg.Connection):
        self.listener = listener
        self.read_at: float | None = None
        self.value: float | None = None

    def seconds(self) -> float | None:
        now = time.monotonic()
        if self.read_at is None or now - self.read_at > NEXT_DUE_TTL_SECONDS:
            self.read_at, self.value = now, seconds_until_due(self.listener)
            return self.value
        return None if self.value is None else self.value - (now - self.read_at)

    def forget(self) -> None:
        self.read_at = None


def seconds_until_due(listener: psycopg.Connection) -> float | None:
    """Seconds until the earliest PENDING execution falls due (negative: overdue), on the
    database clock; None when nothing waits. One index lookup (jw_execution_pending_due)."""
    # The rows in the text, not parameters: the prepared statement is then planned once.
    row = listener.execute(
        f"SELECT EXTRACT(EPOCH FROM min(next_run_at) - clock_timestamp()) "
        f"FROM {JobExecution._meta.db_table} WHERE {PENDING_DUE_ROWS}"
    ).fetchone()
    return None if row[0] is None else float(row[0])


class _Window:
    """The live executors' window in credits (their slots x their prefetch), read at most every
    WINDOW_TTL_SECONDS: it changes when an executor joins or leaves, or asks for a deeper line."""

    def __init__(self, listener: psycopg.Connection):
        self.listener = listener
        self.read_at: float | None = None
        self.value = 0

    def credits(self) -> int:
        now = time.monotonic()
        if self.read_at is None or now - self.read_at > WINDOW_TTL_SECONDS:
            self.read_at = now
            self.value = live_window(self.listener)
        return self.value

    def forget(self) -> None:
        self.read_at = None


_wakeup: WakeUp | None = None


def start() -> None:
    global _wakeup
    if _wakeup is None:
        _wakeup = WakeUp()
        _wakeup.start()
        logger.info("dispatch wake-up listening on %s", DISPATCH_CHANNEL)
