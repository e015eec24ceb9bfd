"""The scheduler worker's wake-up: dispatch as soon as a credit frees up (ARCHITECTURE §4a).

Transactions that free a credit (an execution leaves DISPATCHED or RUNNING) or add capacity (an
executor joins) send `NOTIFY jobweaver_dispatch`, delivered when they commit. One daemon thread
in the scheduler worker LISTENs on its own connection and runs a dispatch per wake-up, folding
every notification that arrived meanwhile into one: executors never dispatch themselves, so
PostgreSQL sees one dispatcher per scheduler, not one per executor thread.
"""

from __future__ import annotations

import logging
import threading

import psycopg
from django.conf import settings
from django.db import connection

from apps.scheduler.dispatch import dispatch_due_jobs
from apps.scheduler.flow import DISPATCH_CHANNEL

logger = logging.getLogger(__name__)

RECONNECT_SECONDS = 1.0


def _listen_connection() -> psycopg.Connection:
    db = settings.DATABASES["default"]
    return psycopg.connect(
        dbname=db["NAME"],
        user=db.get("USER") or None,
        password=db.get("PASSWORD") or None,
        host=db.get("HOST") or None,
        port=db.get("PORT") or None,
        autocommit=True,
    )


class WakeUp(threading.Thread):
    def __init__(self):
        super().__init__(name="jobweaver-wakeup", daemon=True)
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                with _listen_connection() as listener:
                    listener.execute(f"LISTEN {DISPATCH_CHANNEL}")
                    self._dispatch()  # whatever freed up while we were not listening
                    while not self.stopping.is_set():
                        if any(True for _ in listener.notifies(timeout=1.0, stop_after=1)):
                            # Fold in everything that arrived meanwhile: one dispatch for all.
                            for _ in listener.notifies(timeout=0.001):
                                pass
                            self._dispatch()
            except psycopg.Error as exc:
                logger.warning("dispatch wake-up listener lost its connection: %s", exc)
                self.stopping.wait(RECONNECT_SECONDS)

    def _dispatch(self) -> None:
        try:
            dispatch_due_jobs()
        except Exception:  # the beat tick is the safety net; logged with its traceback
            logger.warning("dispatch after a wake-up failed", exc_info=True)
            connection.close()


_wakeup: WakeUp | None = None


def start() -> None:
    global _wakeup
    if _wakeup is None:
        _wakeup = WakeUp()
        _wakeup.start()
        logger.info("dispatch wake-up listening on %s", DISPATCH_CHANNEL)
