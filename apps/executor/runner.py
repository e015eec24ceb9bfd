"""Running the deliveries of a run-job record end to end (what the run_jobs task calls).

`AttemptRunner` claims the execution with the message's event id (the fencing token), runs it
through its kind's runner (apps/executor/runners.py), calls `checkpoint` between and inside steps
(timeout, cancellation, heartbeats, shutdown) and records how the attempt ended — each record one
fenced transaction in apps/executor/services.py. A duplicate or stale message changes nothing.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable

from django.db import close_old_connections, connection

from jobweaver.conf import settings
from jobweaver.core import metrics
from jobweaver.core.db import DATABASE_UNAVAILABLE, retry_while_database_unavailable
from jobweaver.core.host import host_name
from jobweaver.core.logcontext import log_context
from jobweaver.core.tracing import span_under
from jobweaver.engine import executions, ledger
from jobweaver.engine.ledger import AttemptReport
from jobweaver.executor import pauses, shutdown, slots, window
from jobweaver.executor.models import AttemptOutcome
from jobweaver.executor.runners import runner_for
from jobweaver.executor.services import (
    ClaimedAttempt,
    Ending,
    attempt_finish,
    attempt_start,
    attempts_start,
    complete_batch,
    deliveries_accept,
    deliveries_give_back,
    deliveries_recall_paused,
    log_refused,
    start_and_complete_batch,
    unstarted_attempt,
)
from jobweaver.executor.steps import (
    AttemptReleased,
    AttemptSnoozed,
    AttemptStopped,
    StepContext,
    StepFailed,
)
from jobweaver.executor.task_runner import recorded_exception

logger = logging.getLogger(__name__)

# How often a running attempt looks for a cancellation request (a cheap indexed read).
CANCEL_POLL_SECONDS = 0.25
# How long a worker keeps retrying a claim or an outcome while PostgreSQL is unavailable (a
# restart takes about a second); the lease rescue covers anything longer.
DATABASE_RETRY_SECONDS = 20.0


def process_identity() -> str:
    """This executor process, as registered for flow control: "<host>:<pid>"."""
    return f"{host_name()}:{os.getpid()}"


def worker_identity() -> str:
    """This thread of this executor process, as recorded on attempts."""
    return f"{process_identity()}:{threading.current_thread().name}"


class Waiting:
    """A delivery this process holds and has not started: job id, event id, trace id, and,
    once its executor accepted it (`_accept`), what the acceptance read and when."""

    __slots__ = ("accepted", "accepted_at", "event_id", "job_id", "trace_id")

    def __init__(self, job_id: uuid.UUID, event_id: uuid.UUID, trace_id: str | None):
        self.job_id, self.event_id, self.trace_id = job_id, event_id, trace_id
        self.accepted: executions.Accepted | None = None
        self.accepted_at = 0.0  # time.monotonic() of the acceptance


def deliveries_execute(deliveries: list[list[str | None]]) -> None:
    """Run the deliveries of one run-job record — [job id, event id, trace id] each — and
    return once every one has ended, its ending committed (its caller then acknowledges the
    record). As many as there are free slots start at once, in one statement; the rest wait
    in this process's line for a slot (apps/executor/slots.py). On a busy executor all of them
    are accepted first, in one statement, and run before their start is written (`_accept`).
    A record that arrives while the worker shuts down gives its deliveries back, to start
    elsewhere at once."""
    pool = slots.slots(settings.JOBWEAVER_EXECUTOR_CONCURRENCY)
    waiting = [Waiting(uuid.UUID(job), uuid.UUID(event), trace) for job, event, trace in deliveries]
    if shutdown.begun():
        _give_back(waiting)
        return
    record = slots.Record(len(waiting))
    if settings.JOBWEAVER_EXECUTOR_START_DELAY_MS > 0 and not pool.idle_for(len(waiting)):
        # Busy: accept them all in one statement, so that each runs, now or at its turn in
        # line, before its start is written (an idle executor writes its starts first).
        copies = _accept(waiting)
        if copies:
            waiting = [one for one in waiting if one not in copies]
            record.ended(len(copies))
    admitted = pool.admit(waiting, record)
    paused = [one for one in admitted if _paused(one)]  # paused since the record was sent
    if paused:
        admitted = [one for one in admitted if one not in paused]
        _recall_paused([(one, record) for one in paused])
        _free(pool, len(paused))
    runs = [_runs_unstarted(one) for one in admitted]
    ready = [run for run in runs if run is not None]
    to_start = [one for one, run in zip(admitted, runs, strict=True) if run is None]
    if to_start:
        try:
            claimed = _start(to_start)
        except BaseException as error:  # noqa: BLE001 - raised below, once the rest ended
            _free(pool, len(to_start))
            record.ended(len(to_start), error)
        else:
            _free(pool, claimed.count(None))
            record.ended(claimed.count(None))
            ready += [one for one in claimed if one is not None]
    if ready:
        *others, last = ready
        for one in others:
            pool.run(_run_on_slot_thread, pool, one, record)
        _run(pool, last, record, keep_slot=False)  # here: a lone job never changes threads
    record.wait()
    if record.error is not None:
        raise record.error


def _start(batch: list[Waiting]) -> list[ClaimedAttempt | None]:
    job_id, trace_id = (batch[0].job_id, batch[0].trace_id) if len(batch) == 1 else (None, None)
    try:
        with log_context(trace_id=trace_id, job_id=job_id):  # a stale delivery's log line
            return retry_while_database_unavailable(
                lambda: attempts_start(
                    [(one.job_id, one.event_id) for one in batch], worker_id=worker_identity()
                ),
                what=f"claim of {len(batch)} deliveries",
                timeout=DATABASE_RETRY_SECONDS,
            )
    finally:
        for one in batch:
            if one.accepted is not None:
                slots.accepted_done(one.event_id)


def _accept(line: list[Waiting]) -> list[Waiting]:
    """Accept the deliveries of a record that reached a busy executor (issue 34): no other
    executor may start them now, so a slot that takes one soon may run it before its start is
    written (see AttemptRunner). Best effort: a refused or failed acceptance leaves a delivery
    to be started at its turn, as without it. Returns the copies of deliveries this process
    already holds accepted (a duplicate record): the caller drops them."""
    try:
        accepted = deliveries_accept(
            [(one.job_id, one.event_id) for one in line], executor_id=process_identity()
        )
    except DATABASE_UNAVAILABLE as exc:
        logger.warning("deliveries not accepted (they start at their turn): %s", exc)
        connection.close()
        return []
    now = time.monotonic()
    found = [(one, accepted.get((one.job_id, one.event_id))) for one in line]
    found = [(one, it) for one, it in found if it is not None]
    firsts = slots.accepted_first([one.event_id for one, _ in found])
    copies = []
    for (one, it), first in zip(found, firsts, strict=True):
        if not first:
            logger.info(
                "delivery %s of job %s is a duplicate; ignoring it", one.event_id, one.job_id
            )
            copies.append(one)
            continue
        one.accepted_at = now
        one.accepted = it
    return copies


def _runs_unstarted(delivery: Waiting) -> ClaimedAttempt | None:
    """The delivery as an attempt to run before its start is written, or None to start it
    first: only an accepted one, taken soon after its acceptance (a cancel meanwhile is still
    noticed by the start's fence otherwise), not a workflow's job (its completion settles the
    workflow), and not a job sent again without an attempt (it may have stopped an executor
    before: its start is written first, so a crash is counted as an attempt)."""
    accepted = delivery.accepted
    if accepted is None or settings.JOBWEAVER_EXECUTOR_START_DELAY_MS <= 0:
        return None
    if time.monotonic() - delivery.accepted_at > CANCEL_POLL_SECONDS:
        return None
    if accepted.workflow_id is not None or accepted.redelivery_count > 0:
        return None
    return unstarted_attempt(delivery.job_id, delivery.event_id, accepted)


def _paused(delivery: Waiting) -> bool:
    """An accepted delivery of a queue or job type paused since (as this process last read the
    pauses): its executor gives it back, as the pause took back those no executor accepted."""
    accepted = delivery.accepted
    return accepted is not None and pauses.paused(accepted.queue_name, accepted.job_type)


def give_back_paused() -> int:
    """Read the pauses; give back the accepted deliveries of paused queues or job types that
    wait in this process's line, and have attempts of them that run before their start was
    written write it at their next checkpoint (the presence thread calls this when a pause or a
    resume commits, and at each heartbeat). Returns how many went back."""
    pauses.refresh()
    for attempt in slots.unstarted_attempts():
        if pauses.paused(attempt.claimed.queue_name, attempt.claimed.kind):
            attempt.start_due = 0.0
    pool = slots.current()
    line = pool.take_from_line(_paused) if pool is not None else []
    if line:
        _recall_paused(line)
    return len(line)


def _recall_paused(line: list[tuple[Waiting, slots.Record]]) -> None:
    """Give back accepted deliveries of paused work (each ends for its record; the caller frees
    a slot any of them held). A failed statement leaves them DISPATCHED and accepted: their
    leases, no longer renewed, expire and the rescue sends them again once the pause is
    lifted."""
    event_ids = [one.event_id for one, _ in line]
    for event_id in event_ids:
        slots.accepted_done(event_id)
    error = None
    try:
        given = retry_while_database_unavailable(
            lambda: deliveries_recall_paused(event_ids, executor_id=process_identity()),
            what="the give-back of paused deliveries",
            timeout=DATABASE_RETRY_SECONDS,
        )
        logger.info("paused: %d of %d accepted deliveries given back", given, len(line))
    except BaseException as failed:  # noqa: BLE001 - each record's thread raises it
        error = failed
    for _, record in line:
        record.ended(error=error)


def _run(
    pool: slots.Slots, claimed: ClaimedAttempt, record: slots.Record, *, keep_slot: bool = True
) -> None:
    """Run a started attempt holding its slot; with `keep_slot` (a slot thread), then the
    deliveries that wait in line for it, as long as each ends in a success."""
    following: tuple[ClaimedAttempt, slots.Record] | None = (claimed, record)
    while following is not None:
        following = _run_one(pool, *following, keep_slot=keep_slot)


def _run_one(
    pool: slots.Slots, claimed: ClaimedAttempt, record: slots.Record, *, keep_slot: bool
) -> tuple[ClaimedAttempt, slots.Record] | None:
    """One attempt on this thread's slot; the slot's time on it sizes the window. A success is
    handed to the slots' writer, and the record learns of it once committed: with `keep_slot`
    this thread takes the next delivery in line itself and returns it (None: the line was
    empty and the slot is free again), else the slot goes on to another slot thread. Any other
    ending frees the slot as soon as the work is done, while this thread writes it."""
    freed = False
    taken = time.monotonic()

    def free_slot() -> None:
        nonlocal freed
        if not freed:
            freed = True
            window.ran(time.monotonic() - taken)
            _free(pool, 1)

    def written(error: BaseException | None) -> None:
        record.ended(error=error)

    try:
        outcome = execute_claimed(claimed, on_ran=free_slot, behind=(pool, written))
    except BaseException as error:  # noqa: BLE001 - the record's thread raises it
        record.ended(error=error)
        free_slot()
        return None
    if outcome is not WRITTEN_BEHIND:
        record.ended()
        free_slot()
        return None
    if not keep_slot:
        free_slot()
        return None
    window.ran(time.monotonic() - taken)
    following = pool.next_or_give()
    return _take_on_slot(pool, *following) if following is not None else None


def _run_on_slot_thread(pool: slots.Slots, claimed: ClaimedAttempt, record: slots.Record) -> None:
    _sound_connection()
    _run(pool, claimed, record)


def _start_on_slot_thread(pool: slots.Slots, delivery: Waiting, record: slots.Record) -> None:
    """Holding a slot: start the delivery that waited in line for it, and run it."""
    taken = _take_on_slot(pool, delivery, record)
    if taken is not None:
        _run(pool, *taken)


def _take_on_slot(
    pool: slots.Slots, delivery: Waiting, record: slots.Record
) -> tuple[ClaimedAttempt, slots.Record] | None:
    """Holding a slot: the delivery that waited in line for it, as an attempt to run on it
    (started, or accepted to run before its start is written); None when it is not to run
    here (given back, paused, stale), its slot passed on."""
    job_id, event_id, trace_id = delivery.job_id, delivery.event_id, delivery.trace_id
    if shutdown.begun():  # this one and the whole line go back
        line = [(delivery, record), *pool.take_line()]
        error = None
        try:
            _give_back([waiting for waiting, _ in line])
        except BaseException as failed:  # noqa: BLE001 - each record's thread raises it
            error = failed
        for _, owner in line:
            owner.ended(error=error)
        _free(pool, 1)
        return None
    _sound_connection()
    if _paused(delivery):
        _recall_paused([(delivery, record)])
        _free(pool, 1)
        return None
    unstarted = _runs_unstarted(delivery)
    if unstarted is not None:
        return unstarted, record
    try:
        with log_context(trace_id=trace_id, job_id=job_id):
            claimed = retry_while_database_unavailable(
                lambda: attempt_start(
                    job_id=job_id, event_id=event_id, worker_id=worker_identity()
                ),
                what=f"claim of job {job_id}",
                timeout=DATABASE_RETRY_SECONDS,
            )
    except BaseException as error:  # noqa: BLE001 - the record's thread raises it
        _free(pool, 1)
        record.ended(error=error)
        return None
    finally:
        slots.accepted_done(event_id)
    if claimed is None:
        _free(pool, 1)
        record.ended()
        return None
    return claimed, record


def _write_starts_and_successes(items: list) -> list[bool]:
    return retry_while_database_unavailable(
        lambda: start_and_complete_batch(items),
        what=f"start and success of {len(items)} attempts",
        timeout=DATABASE_RETRY_SECONDS,
    )


def _write_successes(items: list) -> list[bool]:
    return retry_while_database_unavailable(
        lambda: complete_batch(items),
        what=f"success of {len(items)} attempts",
        timeout=DATABASE_RETRY_SECONDS,
    )


def _free(pool: slots.Slots, count: int) -> None:
    """Slots this thread holds and is done with: each goes to the next delivery in line (on a
    slot thread), or is free again."""
    for _ in range(count):
        following = pool.next_or_give()
        if following is not None:
            pool.run(_start_on_slot_thread, pool, *following)


def _sound_connection() -> None:
    """As Django does per request, a broken or old connection is dropped before an attempt, with
    no health-check query: the attempt's statements retry through an outage, as the record's
    thread does (apps/executor/tasks.py). Never raises: a slot thread must always end what it
    took (its record waits for it)."""
    try:
        close_old_connections()
    except Exception:  # the attempt's first statement reconnects (retry_while_database_...)
        logger.warning("closing a broken database connection failed", exc_info=True)
    connection.health_check_done = True


def _give_back(waiting: list[Waiting]) -> None:
    for one in waiting:
        slots.accepted_done(one.event_id)
    given = retry_while_database_unavailable(
        lambda: deliveries_give_back([one.event_id for one in waiting]),
        what="the give-back of deliveries not started",
        timeout=DATABASE_RETRY_SECONDS,
    )
    logger.info("shutting down: %d of %d deliveries not started given back", given, len(waiting))


def attempt_execute(*, job_id: uuid.UUID, event_id: uuid.UUID) -> str | None:
    """Run one delivery of a job; returns the recorded outcome, or None if the delivery was a
    duplicate or stale (or its outcome was refused by the fence)."""
    claimed = retry_while_database_unavailable(
        lambda: attempt_start(job_id=job_id, event_id=event_id, worker_id=worker_identity()),
        what=f"claim of job {job_id}",
        timeout=DATABASE_RETRY_SECONDS,
    )
    if claimed is None:
        return None
    return execute_claimed(claimed)


# execute_claimed's outcome when the success was handed to the slots' writer (`behind`): the
# thread goes on, and the record learns of the success once it is committed.
WRITTEN_BEHIND = "written behind"


def execute_claimed(
    claimed: ClaimedAttempt,
    on_ran: Callable[[], None] | None = None,
    behind: tuple[slots.Slots, Callable[[BaseException | None], None]] | None = None,
) -> str | None:
    """Run a started attempt and record its ending; returns the recorded outcome (None when the
    fence refused it). `on_ran` is called when the work is done, before the ending is written
    (at most once). With `behind` (the slots, and what to call once the success is committed
    or its write failed), a success is handed to the slots' writer and WRITTEN_BEHIND returned
    at once, without `on_ran`."""
    job_id = claimed.job_id
    attributes = {"jobweaver.job_id": str(job_id), "jobweaver.attempt": claimed.attempt}
    with (
        log_context(trace_id=claimed.trace_id, job_id=job_id, attempt=claimed.attempt),
        span_under(claimed.traceparent, "jobweaver.attempt", attributes) as span,
    ):
        outcome = AttemptRunner(claimed, on_ran, behind).run()
        span.set_attribute("jobweaver.outcome", str(outcome))
    if outcome is not WRITTEN_BEHIND:  # else once it is committed
        runner_for(claimed.kind).finished(claimed)
    return outcome


class AttemptRunner:
    """One claimed attempt: its steps (or its Python task, apps/executor/task_runner.py), its
    checkpoints, its progress and its ending."""

    def __init__(
        self,
        claimed: ClaimedAttempt,
        on_ran: Callable[[], None] | None = None,
        behind: tuple[slots.Slots, Callable[[BaseException | None], None]] | None = None,
    ):
        self.claimed = claimed
        self.on_ran = on_ran  # called once the work is done, before its ending is written
        self.behind = behind  # where a success goes to be written (see execute_claimed)
        self.written_behind = False
        self.steps_completed = 0
        self.total_steps: int | None = None  # a TASK's own, once it reports progress
        self.started = time.monotonic()
        # An attempt run before its start was written (ClaimedAttempt.started False) writes it
        # at its first checkpoint past this time, or with its success if that comes sooner.
        self.unstarted = not claimed.started
        self.start_due = self.started + settings.JOBWEAVER_EXECUTOR_START_DELAY_MS / 1000
        self.heartbeat_interval = settings.JOBWEAVER_LEASE_SECONDS / 3
        self.next_heartbeat = self.started + self.heartbeat_interval
        self.next_cancel_poll = self.started + CANCEL_POLL_SECONDS
        self.ctx = StepContext(
            job_id=str(claimed.job_id),
            attempt=claimed.attempt,
            trace_id=claimed.trace_id,
            checkpoint=self.checkpoint,
        )

    def run(self) -> str | None:
        claimed = self.claimed
        runner = runner_for(claimed.kind)
        if not self.unstarted:
            return self._run(runner)
        slots.unstarted_add(claimed.event_id, self)  # its dispatch lease is renewed meanwhile
        try:
            return self._run(runner)
        finally:
            if not self.written_behind:  # else once it is committed
                self._unstarted_done()

    def _unstarted_done(self) -> None:
        slots.unstarted_discard(self.claimed.event_id)
        slots.accepted_done(self.claimed.event_id)

    def _run(self, runner) -> str | None:
        claimed = self.claimed
        try:
            value = runner.run(claimed, self)
        except StepFailed as failure:
            return self.end(
                Ending.FAILURE,
                error=failure.message,
                retryable=failure.retryable,
                **recorded_exception(failure),
            )
        except AttemptSnoozed as snooze:
            return self.end(Ending.SNOOZED, snooze_seconds=snooze.seconds)
        except AttemptReleased:
            if self.end(Ending.RELEASED):
                logger.info(
                    "job %s attempt %d released at shutdown", claimed.job_id, claimed.attempt
                )
                return AttemptOutcome.LOST
            # A cancel request came first: the attempt ends cancelled instead.
            return self.end(Ending.CANCELLED)
        except AttemptStopped as stop:
            if self.end(Ending.CANCELLED):
                logger.info("job %s attempt %d cancelled", claimed.job_id, claimed.attempt)
                return AttemptOutcome.CANCELLED
            logger.warning(
                "job %s attempt %d stopped (%s) and rejected by the fence: event %s is no "
                "longer current (the lease expired and the job was rescued); nothing recorded",
                claimed.job_id,
                claimed.attempt,
                stop.reason,
                claimed.event_id,
            )
            return None
        return self.end(Ending.SUCCESS, result=value)

    def end(
        self, ending: Ending, *, error: str = "", retryable: bool = True, **task_fields
    ) -> str | None:
        """Record the ending, retrying through a short database outage. Safe to repeat: it is
        one fenced transaction, so a retry after a lost commit is simply refused. `task_fields`
        are a TASK attempt's return value or exception (see `attempt_finish`)."""
        if (
            ending is Ending.SUCCESS
            and self.behind is not None
            and self.claimed.workflow_id is None
        ):
            self._end_behind(task_fields.get("result"))
            return WRITTEN_BEHIND
        if self.on_ran is not None:  # its slot may take the next attempt while this one writes
            on_ran, self.on_ran = self.on_ran, None
            on_ran()
        claimed = self.claimed
        if self.unstarted:
            try:  # any other ending is recorded on a started attempt, as always
                self.write_start()
            except AttemptStopped:
                logger.warning(
                    "job %s attempt %d ended %s before its start was written, and the start "
                    "was refused (cancelled, or taken by the rescue, meanwhile); nothing recorded",
                    claimed.job_id,
                    claimed.attempt,
                    ending,
                )
                return None
        accepted = retry_while_database_unavailable(
            lambda: attempt_finish(
                claimed=claimed,
                outcome=ending,
                error=error,
                retryable=retryable,
                steps_completed=self.steps_completed,
                log_lines=self.ctx.log_lines,
                total_steps=self.total_steps,
                **task_fields,
            ),
            what=f"{ending.lower()} of job {claimed.job_id} attempt {claimed.attempt}",
            timeout=DATABASE_RETRY_SECONDS,
        )
        if not accepted:
            return None
        outcome = AttemptOutcome.LOST if ending is Ending.RELEASED else str(ending)
        metrics.ATTEMPT_DURATION.labels(outcome).observe(time.monotonic() - self.started)
        if ending in (Ending.SUCCESS, Ending.FAILURE, Ending.SNOOZED):
            logger.info("job %s attempt %d: %s %s", claimed.job_id, claimed.attempt, ending, error)
        return outcome

    def _end_behind(self, result) -> None:
        """A success handed to the slots' writer, this thread going on at once (no workflow to
        settle: a workflow's job writes its own). Once its statement returned, on the writer's
        thread: the log line, the metric, the kind's `finished`, and the record learns of it
        (`behind`'s callback), which acknowledges committed work only."""
        claimed = self.claimed
        pool, written = self.behind
        report = AttemptReport(
            steps_completed=self.steps_completed,
            log_lines=self.ctx.log_lines,
            total_steps=self.total_steps,
            result=result,
        )
        unstarted, started = self.unstarted, self.started
        if unstarted:  # its start goes in the same statement
            item = (
                claimed.job_id,
                claimed.event_id,
                worker_identity(),
                time.monotonic() - started,
                report,
            )
            writer = pool.writer(
                "starts-and-successes",
                _write_starts_and_successes,
                settings.JOBWEAVER_EXECUTOR_WRITE_BATCH,
            )
        else:
            item = (claimed.job_id, claimed.event_id, report)
            writer = pool.writer(
                "successes", _write_successes, settings.JOBWEAVER_EXECUTOR_WRITE_BATCH
            )

        def done(accepted: bool | None, error: BaseException | None) -> None:
            context = log_context(
                trace_id=claimed.trace_id, job_id=claimed.job_id, attempt=claimed.attempt
            )
            try:
                with context:
                    if error is None and accepted:
                        metrics.ATTEMPT_DURATION.labels(Ending.SUCCESS).observe(
                            time.monotonic() - started
                        )
                        logger.info(
                            "job %s attempt %d: %s ",
                            claimed.job_id,
                            claimed.attempt,
                            Ending.SUCCESS,
                        )
                        runner_for(claimed.kind).finished(claimed)
                    elif error is None:
                        log_refused(claimed, Ending.SUCCESS)
            finally:
                if not claimed.started:  # run() registered it, whether or not its start is written
                    self._unstarted_done()
                written(error)

        self.written_behind = True
        try:
            writer.submit(item, done)
        except BaseException:
            self.written_behind = False  # nothing was handed over: run() cleans up as always
            raise

    def write_start(self) -> None:
        """Write the start of an attempt that began before it was written (DISPATCHED →
        RUNNING, its attempt opened), recorded when its work began. Raises AttemptStopped when the
        fence refuses it: the job was cancelled, or the rescue took the delivery, meanwhile."""
        claimed = self.claimed
        self.unstarted = False
        started = retry_while_database_unavailable(
            lambda: attempt_start(
                job_id=claimed.job_id,
                event_id=claimed.event_id,
                worker_id=worker_identity(),
                began=self.started,
            ),
            what=f"claim of job {claimed.job_id}",
            timeout=DATABASE_RETRY_SECONDS,
        )
        if started is None:
            raise AttemptStopped("cancelled, or taken by the rescue, before its start was written")
        now = time.monotonic()
        self.next_heartbeat = now + self.heartbeat_interval
        self.next_cancel_poll = now + CANCEL_POLL_SECONDS
        if self.steps_completed:  # progress made before the start had nowhere to go
            self._write_progress()

    def _write_progress(self) -> None:
        try:
            ledger.attempt_progress(
                event_id=self.claimed.event_id,
                steps_completed=self.steps_completed,
                log_lines=self.ctx.log_lines,
                total_steps=self.total_steps,
            )
        except DATABASE_UNAVAILABLE as exc:  # progress is informative; the outcome is not
            logger.warning("progress of job %s not recorded: %s", self.claimed.job_id, exc)
            connection.close()

    def on_step_done(self, count: int, total: int) -> None:
        self.steps_completed = count
        if count == total or self.unstarted:
            # The ending records the progress of the last step, in its transaction; before the
            # start is written there is no attempt row yet (write_start writes it then).
            return
        self._write_progress()

    def on_task_progress(self, completed: int, total: int) -> None:
        """A TASK's `context.report_progress`, written from the attempt's own thread."""
        self.steps_completed, self.total_steps = completed, total
        if not self.unstarted:  # else write_start writes it
            self._write_progress()

    def checkpoint(self) -> None:
        """Called between steps and inside long steps: enforces the attempt's timeout, notices
        cancellation within CANCEL_POLL_SECONDS, and heartbeats about every third of the lease.
        Raises AttemptReleased, AttemptStopped or StepFailed to end the attempt."""
        if shutdown.grace_expired():
            raise AttemptReleased("the worker is shutting down")
        timeout = self.claimed.timeout_seconds
        if time.monotonic() - self.started > timeout:
            raise StepFailed(f"timed out after {timeout} s (timeoutSeconds)", retryable=True)
        self.keep_alive()

    def keep_alive(self) -> None:
        """The checkpoint without the timeout: what the process pool calls while a child that
        was asked to stop at the timeout still runs (§13a: the attempt stays RUNNING)."""
        now = time.monotonic()
        if shutdown.grace_expired():
            raise AttemptReleased("the worker is shutting down")
        if self.unstarted:
            if now >= self.start_due:
                self.write_start()
            return  # nothing to renew before the start: the presence thread holds it
        ids = {"job_id": self.claimed.job_id, "event_id": self.claimed.event_id}
        try:
            if now >= self.next_heartbeat:
                self.next_heartbeat = now + self.heartbeat_interval
                self.next_cancel_poll = now + CANCEL_POLL_SECONDS
                if not executions.execution_heartbeat(**ids):
                    raise AttemptStopped("lease lost or cancellation requested")
            elif now >= self.next_cancel_poll:
                self.next_cancel_poll = now + CANCEL_POLL_SECONDS
                if executions.execution_should_stop(**ids):
                    raise AttemptStopped("lease lost or cancellation requested")
        except DATABASE_UNAVAILABLE as exc:
            # Keep working through a short outage and heartbeat again soon; if the lease runs
            # out meanwhile, the rescue takes the job and the fence refuses our outcome.
            logger.warning("heartbeat of job %s failed: %s", self.claimed.job_id, exc)
            connection.close()
            self.next_heartbeat = now + min(1.0, self.heartbeat_interval)
