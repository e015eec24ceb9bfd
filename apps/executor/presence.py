"""An executor process's presence for flow control (ARCHITECTURE §4a).

One daemon thread per executor process registers it (worker id, queue, slots, the run-job
partitions its consumer owns, the deliveries a slot it asks for: apps/executor/window.py) and
renews that every JOBWEAVER_WORKER_HEARTBEAT_SECONDS on the
database clock. With each beat it also renews the dispatch lease of the deliveries it has
received but not started yet (Celery's reserved requests): waiting for a free slot behind long
jobs is not a lost delivery. A process that stops beating — killed, frozen (SIGSTOP), cut off —
loses its credits after JOBWEAVER_WORKER_TTL_SECONDS, and its deliveries are redelivered or
rescued when their leases expire. A clean shutdown deregisters at once.

With JOBWEAVER_EXECUTOR_START_DELAY_MS on, the thread also LISTENs for pauses on a connection of
its own: when one commits, the accepted deliveries of the paused work still waiting in this
process's line go back at once (`runner.give_back_paused`, apps/executor/pauses.py).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time

import psycopg
from celery.worker import state as worker_state
from django.db import connection

from jobweaver.conf import settings
from jobweaver.core import liveness
from jobweaver.core.db import DATABASE_UNAVAILABLE, listen_connection
from jobweaver.engine import executions
from jobweaver.engine.claim import PAUSE_CHANNEL
from jobweaver.executor import slots, window
from jobweaver.executor.runner import give_back_paused, process_identity
from jobweaver.scheduler import flow

logger = logging.getLogger(__name__)

RUN_JOBS_TASK = "jobweaver.executor.tasks.run_jobs"
RUN_JOB_TASK = "jobweaver.executor.tasks.run_job"  # the one-delivery record of earlier versions
# How often the thread looks at its consumer's partitions between beats (a read in memory).
ASSIGNMENT_WATCH_SECONDS = 0.1
# How long newly assigned partitions wait before they are registered. librdkafka keeps one fetch
# request per broker in flight and starts the new partitions one by one, so its first fetch
# after an assignment holds only some of them; a record on another one waits until that fetch
# returns, fetch.wait.max.ms later (kombu_kafka/clients.py). Registered this late, a new
# partition is already fetched when dispatch first sends to it (bench/NOTES.md).
NEW_PARTITION_SETTLE_SECONDS = 0.2
# A change of the deliveries a slot asked for is reported at once, but at most this often.
WINDOW_REPORT_SECONDS = 1.0


def _waiting_event_ids() -> list[str]:
    """Event ids of deliveries this process holds and has not started: those of the records
    Celery reserved, those of the running records still waiting for a slot (slots.py), and
    those running before their start was written (runner.AttemptRunner)."""
    for _ in range(3):  # the WeakSet may change while we copy it; try again
        try:
            requests = list(worker_state.reserved_requests)
            break
        except RuntimeError:
            continue
    else:
        requests = []
    waiting = [str(one.event_id) for one in slots.waiting()]
    waiting += [str(event_id) for event_id in slots.unstarted()]
    for request in requests:
        if request.name == RUN_JOBS_TASK and len(request.args) == 1:
            waiting += [delivery[1] for delivery in request.args[0]]
        elif request.name == RUN_JOB_TASK and len(request.args) == 2:
            waiting.append(request.args[1])
    return waiting


class Presence(threading.Thread):
    def __init__(self, *, consumer, queue: str, slots: int, serves: list[str]):
        super().__init__(name="jobweaver-presence", daemon=True)
        self.consumer, self.queue, self.slots = consumer, queue, slots
        self.serves = list(serves)  # the job queues this executor runs (ARCHITECTURE §15)
        self.worker_id = process_identity()
        self.stopping = threading.Event()
        # Only an executor that accepts deliveries (the start delay) needs to hear of pauses.
        self.watches_pauses = settings.JOBWEAVER_EXECUTOR_START_DELAY_MS > 0
        self.listener: psycopg.Connection | None = None
        self.reported: int | None = None  # the prefetch the last beat registered
        self.beaten_at = 0.0

    def run(self) -> None:
        beaten: list[int] | None = None
        while True:
            partitions = self._partitions()
            prefetch = window.prefetch()
            try:
                flow.executor_heartbeat(
                    worker_id=self.worker_id,
                    queues=self.serves,
                    slots=self.slots,
                    partitions=partitions,
                    joined=partitions != beaten or prefetch > (self.reported or 0),
                    prefetch=prefetch,
                )
                beaten, self.reported = partitions, prefetch
                self.beaten_at = time.monotonic()
                executions.executions_hold(_waiting_event_ids(), executor_id=self.worker_id)
                if self.watches_pauses:  # a pause this thread did not hear of, too
                    self._listen()
                    give_back_paused()
            except DATABASE_UNAVAILABLE as exc:
                logger.warning("executor heartbeat failed: %s", exc)
                connection.close()
            # Liveness (the process and this loop run), not readiness: a database outage is no
            # reason to restart the executor.
            liveness.touch("executor")
            if self._wait_for_next_beat(beaten):
                break
        self._unlisten()
        try:
            flow.executor_deregister(worker_id=self.worker_id)
            logger.info("executor %s deregistered", self.worker_id)
        except DATABASE_UNAVAILABLE as exc:
            logger.warning("executor %s not deregistered: %s", self.worker_id, exc)
        finally:
            connection.close()

    def _wait_for_next_beat(self, beaten: list[int] | None) -> bool:
        """Sleep until the next heartbeat is due, or sooner when the consumer's partitions
        changed (its first assignment after start, a rebalance): registering them then lets
        the first job after a start, or after a rebalance, go without waiting a whole beat.
        Sooner too when the deliveries a slot this executor asks for changed (at most every
        WINDOW_REPORT_SECONDS). True when the thread is stopping."""
        deadline = time.monotonic() + settings.JOBWEAVER_WORKER_HEARTBEAT_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            if self._wait(min(left, ASSIGNMENT_WATCH_SECONDS)):
                return True
            partitions = self._partitions()
            if partitions != beaten:
                if set(partitions) - set(beaten or ()):  # lost ones only: no wait
                    return self.stopping.wait(NEW_PARTITION_SETTLE_SECONDS)
                return False
            if (
                window.prefetch() != self.reported
                and time.monotonic() - self.beaten_at >= WINDOW_REPORT_SECONDS
            ):
                return False
        return self.stopping.is_set()

    def _wait(self, seconds: float) -> bool:
        """Wait `seconds`, hearing of pauses meanwhile; True when the thread is stopping."""
        if self.listener is None:
            return self.stopping.wait(seconds)
        try:
            if list(self.listener.notifies(timeout=seconds, stop_after=1)):
                give_back_paused()
        except psycopg.Error as exc:  # heard again at the next beat; pauses read there too
            logger.warning("executor's pause listener lost its connection: %s", exc)
            self._unlisten()
        except DATABASE_UNAVAILABLE as exc:
            logger.warning("paused deliveries not given back (at the next beat): %s", exc)
            connection.close()
        return self.stopping.is_set()

    def _listen(self) -> None:
        """LISTEN for pauses on a connection of this thread's own, if not already."""
        if self.listener is None:
            try:
                self.listener = listen_connection()
                self.listener.execute(f"LISTEN {PAUSE_CHANNEL}")
            except psycopg.Error as exc:  # the beat reads the pauses meanwhile
                logger.warning("executor cannot listen for pauses: %s", exc)
                self._unlisten()

    def _unlisten(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            with contextlib.suppress(psycopg.Error):
                listener.close()

    def _partitions(self) -> list[int]:
        """The run-job partitions the worker's consumer owns now. Read through Celery's
        consumer each time: after a broker outage Celery reconnects with a new channel."""
        try:
            return self.consumer.task_consumer.channel.assigned_partitions(self.queue)
        except AttributeError:  # between connections: no channel, no partitions, no credits
            return []

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=5)


_presence: Presence | None = None


def start(*, consumer, queue: str, slots: int, serves: list[str]) -> None:
    """Register this executor process, serving the job queues `serves`; `consumer` is Celery's
    worker consumer."""
    global _presence
    if _presence is None:
        _presence = Presence(consumer=consumer, queue=queue, slots=slots, serves=serves)
        _presence.start()
        logger.info(
            "executor %s registered with %d slots, serving %s",
            _presence.worker_id,
            slots,
            ", ".join(serves),
        )


def stop() -> None:
    if _presence is not None:
        _presence.stop()
