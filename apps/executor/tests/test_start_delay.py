"""A busy executor runs what it takes from its line before writing the start (issue 34,
JOBWEAVER_EXECUTOR_START_DELAY_MS): the deliveries that go into the line are accepted in one
statement, so no other executor may start them; an attempt that succeeds within the delay writes
its start and its success in one statement, one that runs longer writes its start then, and a
cancel or a rescue meanwhile wins. Real threads, real connections, real PostgreSQL."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.test.utils import override_settings
from django.utils import timezone

from jobweaver.core.kafka import JOB_COMPLETED
from jobweaver.core.writebehind import WriteBehind
from jobweaver.engine import executions
from jobweaver.executor import pauses, runner, shutdown, slots
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler import services as scheduler_services
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.invariants import check_invariants
from jobweaver.scheduler.models import ExecutionStatus, JobExecution, Pause
from jobweaver.scheduler.rescue import rescue_expired_leases
from jobweaver.scheduler.tests.factories import (
    dispatched,
    dispatched_record,
    execution_of,
    live_executor,
    submitted_job,
)
from tests.stack import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

SLOTS = 4
LOG = [{"action": "LOG", "message": "hello"}]


@pytest.fixture(autouse=True)
def four_slots():
    with override_settings(JOBWEAVER_EXECUTOR_CONCURRENCY=SLOTS):
        slots.close()
        yield
        slots.close()
        shutdown.reset()
        pauses.known(queues=[], job_types=[])


@pytest.fixture
def statements(monkeypatch):
    """The rows of each start, accept, and start-with-success statement the executor runs (the
    engine's real functions)."""
    seen: dict[str, list[int]] = {"start": [], "accept": [], "start_and_complete": []}
    for kind, name in (
        ("start", "executions_start"),
        ("accept", "executions_accept"),
        ("start_and_complete", "executions_start_and_complete"),
    ):
        real = getattr(executions, name)

        def counted(rows, *args, real=real, kind=kind, **kwargs):
            seen[kind].append(len(rows))
            return real(rows, *args, **kwargs)

        monkeypatch.setattr(executions, name, counted)
    return seen


def in_background(record) -> threading.Thread:
    def execute() -> None:
        try:
            runner.deliveries_execute(record)
        finally:
            connections.close_all()  # this thread's own

    # A daemon: a failed test must not leave the session waiting for it.
    thread = threading.Thread(target=execute, daemon=True)
    thread.start()
    return thread


def completed_events(job_id) -> int:
    return OutboxEvent.objects.filter(topic__endswith=JOB_COMPLETED, key=str(job_id)).count()


@override_settings(JOBWEAVER_EXECUTOR_START_DELAY_MS=60_000)
def test_a_busy_executor_writes_a_short_attempts_start_with_its_success(statements):
    record = dispatched_record(LOG, 3 * SLOTS)

    runner.deliveries_execute(record)

    # More than the free slots: all are accepted in one statement, and each succeeds with its
    # start in one statement (shared by the successes that end together).
    assert statements["start"] == []
    assert statements["accept"] == [3 * SLOTS]
    assert sum(statements["start_and_complete"]) == 3 * SLOTS
    for job_id, event_id, _ in record:
        execution = execution_of(uuid.UUID(job_id))
        assert (execution.status, execution.attempt_count, execution.accepted) == (
            ExecutionStatus.COMPLETED,
            1,
            False,
        )
        [attempt] = ExecutionAttempt.objects.filter(job_id=job_id)
        assert (str(attempt.event_id), attempt.outcome, attempt.attempt) == (event_id, "SUCCESS", 1)
        assert attempt.worker_id.startswith(runner.process_identity() + ":")
        assert attempt.started_at <= attempt.finished_at == execution.finished_at
        assert execution.started_at == attempt.started_at
        assert (attempt.steps_completed, attempt.total_steps, attempt.log_lines) == (
            1,
            1,
            ["hello"],
        )
        assert completed_events(job_id) == 1
    assert check_invariants() == []


@override_settings(JOBWEAVER_EXECUTOR_START_DELAY_MS=60_000)
def test_slots_run_their_line_while_their_successes_are_written_behind(monkeypatch):
    """A slot hands its success to the slots' writer and runs the next delivery in line at
    once: the first write is held until every job's success was handed over (12 jobs on 4
    slots and 8 slot threads: slots that waited for their writes could not get there), and
    the record returns only once every success is committed."""
    record = dispatched_record(LOG, 3 * SLOTS)
    handed: list = []
    real_submit = WriteBehind.submit

    def counted_submit(self, item, done):
        handed.append(item[0])
        return real_submit(self, item, done)

    monkeypatch.setattr(WriteBehind, "submit", counted_submit)
    all_handed_over: list[bool] = []
    real_write = executions.executions_start_and_complete

    def held(rows, *args, **kwargs):
        if not all_handed_over:
            deadline = time.monotonic() + 10
            while len(handed) < 3 * SLOTS and time.monotonic() < deadline:
                time.sleep(0.01)
            all_handed_over.append(len(handed) == 3 * SLOTS)
        return real_write(rows, *args, **kwargs)

    monkeypatch.setattr(executions, "executions_start_and_complete", held)

    runner.deliveries_execute(record)

    assert all_handed_over == [True]
    assert sorted(handed) == sorted(uuid.UUID(job_id) for job_id, _, _ in record)
    for job_id, _, _ in record:  # committed when the record returned
        assert execution_of(uuid.UUID(job_id)).status == ExecutionStatus.COMPLETED
        assert completed_events(job_id) == 1
    assert slots.unstarted() == []
    assert check_invariants() == []


def test_an_idle_executor_writes_the_start_first(statements):
    record = dispatched_record(LOG, SLOTS)

    with override_settings(JOBWEAVER_EXECUTOR_START_DELAY_MS=60_000):
        runner.deliveries_execute(record)

    # Every delivery found a free slot: started in one statement before its work, as always
    # (an idle executor's job reads RUNNING at once).
    assert (statements["start"], statements["accept"]) == ([SLOTS], [])
    assert statements["start_and_complete"] == []
    assert {execution_of(uuid.UUID(j)).status for j, _, _ in record} == {"COMPLETED"}


@override_settings(JOBWEAVER_EXECUTOR_START_DELAY_MS=20)
def test_an_attempt_running_past_the_delay_writes_its_start_then(statements):
    record = dispatched_record([{"action": "SLEEP", "durationMs": 600}], SLOTS + 1)
    first = uuid.UUID(record[0][0])

    thread = in_background(record)
    # It runs at once, DISPATCHED; its start is written 20 ms in, long before its 600 ms of
    # work are done.
    wait_for(
        lambda: execution_of(first).status == ExecutionStatus.RUNNING,
        timeout=10,
        message="the attempt written RUNNING",
    )
    [running] = ExecutionAttempt.objects.filter(job_id=first)
    assert running.outcome == "RUNNING"
    assert thread.is_alive()
    thread.join(10)

    [attempt] = ExecutionAttempt.objects.filter(job_id=first)
    assert (attempt.outcome, attempt.attempt, attempt.event_id) == ("SUCCESS", 1, running.event_id)
    # The one that waited in line for 600 ms had its start written before its work.
    assert statements["accept"] == [SLOTS + 1]
    assert sum(statements["start"]) == SLOTS + 1
    for job_id, _, _ in record:
        assert execution_of(uuid.UUID(job_id)).status == ExecutionStatus.COMPLETED
        assert completed_events(job_id) == 1
    assert check_invariants() == []


@override_settings(JOBWEAVER_EXECUTOR_START_DELAY_MS=300)
def test_a_start_written_past_the_delay_is_recorded_when_the_work_began():
    """The attempt's start is when its work began, not when the start was written 300 ms in:
    its recorded time covers the 600 ms of work, less the time the executor takes to send
    the start's statement (about 10 ms under a full suite's load); written as the
    statement's time, it would cover about 300."""
    record = dispatched_record([{"action": "SLEEP", "durationMs": 600}], SLOTS + 1)
    first = uuid.UUID(record[0][0])

    in_background(record).join(15)

    [attempt] = ExecutionAttempt.objects.filter(job_id=first)
    execution = execution_of(first)
    assert attempt.outcome == "SUCCESS"
    assert attempt.started_at == execution.started_at
    assert (attempt.finished_at - attempt.started_at).total_seconds() >= 0.5
    assert execution.started_at >= execution.dispatched_at


@override_settings(JOBWEAVER_EXECUTOR_START_DELAY_MS=60_000)
def test_a_cancel_while_it_runs_unstarted_wins_and_nothing_is_recorded():
    record = dispatched_record([{"action": "SLEEP", "durationMs": 300}], SLOTS + 1)
    in_line, event_id = uuid.UUID(record[0][0]), uuid.UUID(record[0][1])

    thread = in_background(record)
    wait_for(lambda: event_id in slots.unstarted(), timeout=10, message="it runs unstarted")
    assert execution_of(in_line).status == ExecutionStatus.DISPATCHED
    with transaction.atomic():
        executions.execution_cancel(job_id=in_line)  # at once: it is DISPATCHED
    thread.join(10)

    execution = execution_of(in_line)
    assert execution.status == ExecutionStatus.CANCELLED
    assert not ExecutionAttempt.objects.filter(job_id=in_line).exists()
    assert completed_events(in_line) == 0
    assert slots.unstarted() == []
    assert check_invariants() == []


@override_settings(JOBWEAVER_EXECUTOR_START_DELAY_MS=60_000)
def test_a_failure_before_the_start_is_written_is_recorded_on_a_started_attempt():
    steps = [{"action": "FAIL", "message": "oops", "retryable": True}]
    record = dispatched_record(steps, SLOTS + 1)
    in_line = uuid.UUID(record[-1][0])

    runner.deliveries_execute(record)

    execution = execution_of(in_line)
    assert (execution.status, execution.retry_count) == (ExecutionStatus.PENDING, 1)
    [attempt] = ExecutionAttempt.objects.filter(job_id=in_line)
    assert (attempt.outcome, attempt.error_message) == ("FAILURE", "oops")
    assert check_invariants() == []


@override_settings(JOBWEAVER_EXECUTOR_START_DELAY_MS=60_000)
def test_a_job_sent_again_before_is_started_before_it_runs(statements):
    jobs = [submitted_job(LOG).id for _ in range(SLOTS + 2)]
    JobExecution.objects.filter(job_id=jobs[-1]).update(redelivery_count=1)
    live_executor()
    sent: list = []
    dispatch_due_jobs(job_ids=jobs, publish=sent.extend)

    runner.deliveries_execute([[d.job_id, d.event_id, d.trace_id] for d in sent])

    # All were accepted and ran before their start was written but the one sent again (it
    # may have stopped an executor before): its start was written first.
    assert statements["accept"] == [SLOTS + 2]
    assert sum(statements["start_and_complete"]) == SLOTS + 1
    assert statements["start"] == [1]
    assert {execution_of(job).status for job in jobs} == {ExecutionStatus.COMPLETED}
    assert check_invariants() == []


def test_an_accepted_delivery_is_started_by_its_executor_only():
    job_id = submitted_job(LOG).id
    event_id = dispatched(job_id)
    delivery = [(job_id, event_id)]

    assert list(executions.executions_accept(delivery, executor_id="a:1", serves=["default"]))
    # A duplicate record on another executor (a rebalance moved the partition) changes nothing.
    assert executions.executions_accept(delivery, executor_id="b:2", serves=["default"]) == {}
    started_elsewhere = executions.executions_start(
        [(job_id, event_id, "b:2:t")], serves=["default"]
    )
    assert started_elsewhere == {}
    assert (execution_of(job_id).status, execution_of(job_id).worker_id) == ("DISPATCHED", "a:1")

    started = executions.executions_start([(job_id, event_id, "a:1:t")], serves=["default"])
    assert list(started) == [(job_id, event_id)]
    assert execution_of(job_id).status == ExecutionStatus.RUNNING


def test_a_pause_leaves_accepted_deliveries_to_their_executor_and_waits_for_it(monkeypatch, caplog):
    accepted, other = submitted_job(LOG).id, submitted_job(LOG).id
    executions.executions_accept(
        [(accepted, dispatched(accepted))], executor_id="a:1", serves=["default"]
    )
    dispatched(other)
    monkeypatch.setattr(scheduler_services, "PAUSE_SETTLE_SECONDS", 0.2)

    # No executor answers here: the pause waits for one, then returns all the same.
    scheduler_services.queue_pause(scope="QUEUE", name="default")

    assert execution_of(accepted).status == ExecutionStatus.DISPATCHED  # it may run already
    assert execution_of(other).status == ExecutionStatus.PENDING
    assert "1 accepted deliveries not given back within" in caplog.text


def waiting_in_line(count: int) -> list:
    wait_for(lambda: len(slots.waiting()) == count, timeout=10, message=f"{count} in line")
    return [one.job_id for one in slots.waiting()]


@override_settings(JOBWEAVER_EXECUTOR_START_DELAY_MS=60_000)
def test_a_pause_has_the_executor_give_back_what_waits_in_its_line():
    record = dispatched_record([{"action": "SLEEP", "durationMs": 300}], SLOTS + 3)
    thread = in_background(record)
    in_line = waiting_in_line(3)
    running = [uuid.UUID(job) for job, _, _ in record if uuid.UUID(job) not in in_line]

    # What a pause's commit does to accepted deliveries: its statement leaves them, and the
    # executor, told of it, gives back those still in line (the presence thread calls this).
    Pause.objects.create(scope="QUEUE", name="default", paused_at=timezone.now())
    with transaction.atomic():
        assert executions.executions_recall(queue_names=["default"]) == 0
    assert runner.give_back_paused() == 3
    # The running ones, not yet started in the database, write their start at once.
    wait_for(
        lambda: {execution_of(job).status for job in running} == {ExecutionStatus.RUNNING},
        timeout=10,
        message="the running ones written RUNNING",
    )
    thread.join(10)

    assert not thread.is_alive()
    for job_id in in_line:  # back in their place in line, as the pause takes back any other
        execution = execution_of(job_id)
        assert (execution.status, execution.accepted, execution.worker_id) == ("PENDING", False, "")
        assert execution.current_event_id is None and execution.dispatched_at is not None
        assert not ExecutionAttempt.objects.filter(job_id=job_id).exists()
    assert {execution_of(job).status for job in running} == {ExecutionStatus.COMPLETED}
    assert check_invariants() == []


@override_settings(JOBWEAVER_EXECUTOR_START_DELAY_MS=60_000)
def test_an_accepted_delivery_of_paused_work_is_given_back_at_its_turn_in_line():
    record = dispatched_record([{"action": "SLEEP", "durationMs": 200}], SLOTS + 2)
    thread = in_background(record)
    in_line = waiting_in_line(2)

    # The executor heard of the pause; its line was not swept (the pause came as a slot took
    # them): each slot gives its delivery back instead of running it.
    pauses.known(queues=["default"], job_types=[])
    thread.join(10)

    assert not thread.is_alive()
    assert {execution_of(job).status for job in in_line} == {ExecutionStatus.PENDING}
    assert not ExecutionAttempt.objects.filter(job_id__in=in_line).exists()
    assert ExecutionAttempt.objects.filter(outcome="SUCCESS").count() == SLOTS
    assert check_invariants() == []


def test_the_hold_skips_a_delivery_another_transaction_is_moving_instead_of_waiting():
    """The executor's writer ending a delivery holds its row while the presence thread renews
    the line's leases: the renewal must not wait on it. Waiting, the two multi-row UPDATEs
    deadlocked under load and both stood still for PostgreSQL's deadlock_timeout (1 s)."""
    job_id = submitted_job(LOG).id
    event_id = dispatched(job_id)
    lease = execution_of(job_id).lease_expires_at
    locked, release = threading.Event(), threading.Event()

    def moving() -> None:
        try:
            with transaction.atomic():
                JobExecution.objects.select_for_update().get(job_id=job_id)
                locked.set()
                release.wait(15)
        finally:
            connections["default"].close()

    thread = threading.Thread(target=moving)
    thread.start()
    try:
        assert locked.wait(10)
        began = time.monotonic()
        assert executions.executions_hold([event_id], executor_id="a:1") == 0
        assert time.monotonic() - began < 1
    finally:
        release.set()
        thread.join(15)
    assert execution_of(job_id).lease_expires_at == lease
    assert executions.executions_hold([event_id], executor_id="a:1") == 1  # the next beat's
    assert execution_of(job_id).lease_expires_at > lease


@override_settings(JOBWEAVER_LEASE_SECONDS=30, JOBWEAVER_DISPATCH_TIMEOUT_SECONDS=300)
def test_an_accepted_delivery_whose_executor_died_is_sent_again_with_no_attempt():
    job_id = submitted_job(LOG).id
    event_id = dispatched(job_id)
    before = timezone.now()
    executions.executions_accept([(job_id, event_id)], executor_id="a:1", serves=["default"])
    # The attempt's lease, renewed by the executor's presence, not the long dispatch lease.
    lease = execution_of(job_id).lease_expires_at
    assert before + timedelta(seconds=29) < lease < before + timedelta(seconds=60)
    assert executions.executions_hold([event_id], executor_id="a:1") == 1
    assert execution_of(job_id).lease_expires_at < before + timedelta(seconds=60)
    # Another executor holding a copy of the record does not keep it alive.
    assert executions.executions_hold([event_id], executor_id="b:2") == 0

    rescued = rescue_expired_leases(now=lease + timedelta(seconds=31), job_ids=[job_id])

    execution = execution_of(job_id)
    assert rescued == [job_id]
    assert (execution.status, execution.redelivery_count, execution.attempt_count) == (
        ExecutionStatus.PENDING,
        1,
        0,
    )
    assert not ExecutionAttempt.objects.filter(job_id=job_id).exists()
