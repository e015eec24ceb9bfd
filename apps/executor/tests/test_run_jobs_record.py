"""A run-job record of several deliveries (issue 34): the executor starts as many as it has free
slots in one statement, never runs more attempts at once than its slots, returns (and so
acknowledges the record) only after every attempt's ending committed, ignores a stale delivery
in the record without touching the others, and gives back what it did not start when it shuts
down. Real threads, real connections, real PostgreSQL."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.test.utils import override_settings

from jobweaver.engine import executions
from jobweaver.executor import runner, shutdown, slots, steps
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.scheduler.invariants import check_invariants
from jobweaver.scheduler.models import ExecutionStatus
from jobweaver.scheduler.tests.factories import dispatched_record, execution_of

pytestmark = pytest.mark.django_db(transaction=True)

SLOTS = 4


@pytest.fixture(autouse=True)
def four_slots():
    """This process's slots, fresh for each test."""
    with override_settings(JOBWEAVER_EXECUTOR_CONCURRENCY=SLOTS):
        slots.close()
        yield
        slots.close()
        shutdown.reset()


@pytest.fixture
def start_statements(monkeypatch):
    """The sizes of the start statements the executor runs (the engine's real function)."""
    sizes: list[int] = []
    real = executions.executions_start

    def counted(deliveries, **kwargs):
        sizes.append(len(deliveries))
        return real(deliveries, **kwargs)

    monkeypatch.setattr(executions, "executions_start", counted)
    return sizes


def test_a_record_within_the_free_slots_starts_in_one_statement_and_ends_committed(
    start_statements,
):
    record = dispatched_record([{"action": "LOG", "message": "hello"}], SLOTS)

    runner.deliveries_execute(record)

    # When it returns, every attempt's ending is committed: the record may be acknowledged.
    assert start_statements == [SLOTS]
    for job_id, event_id, _ in record:
        assert execution_of(uuid.UUID(job_id)).status == ExecutionStatus.COMPLETED
        [attempt] = ExecutionAttempt.objects.filter(job_id=job_id)
        assert (str(attempt.event_id), attempt.outcome) == (event_id, "SUCCESS")
    assert check_invariants() == []


def test_a_record_larger_than_the_slots_never_runs_more_attempts_at_once(monkeypatch):
    record = dispatched_record([{"action": "SLEEP", "durationMs": 50}], 3 * SLOTS)
    running, most = 0, 0
    lock = threading.Lock()
    real = steps.SleepStep.run

    def watched(self, step, ctx):  # the work itself, not the writes around it
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        try:
            return real(self, step, ctx)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(steps.SleepStep, "run", watched)

    runner.deliveries_execute(record)

    assert most == SLOTS
    assert {execution_of(uuid.UUID(j)).status for j, _, _ in record} == {ExecutionStatus.COMPLETED}
    assert ExecutionAttempt.objects.filter(outcome="SUCCESS").count() == 3 * SLOTS
    assert slots.waiting() == []


def test_a_stale_delivery_in_a_record_changes_nothing_and_the_others_run():
    record = dispatched_record([{"action": "LOG", "message": "x"}], 3)
    stale_job, _, _ = record[1]
    record[1] = [stale_job, str(uuid.uuid4()), None]  # not the execution's token

    runner.deliveries_execute(record)

    assert execution_of(uuid.UUID(stale_job)).status == ExecutionStatus.DISPATCHED
    assert not ExecutionAttempt.objects.filter(job_id=stale_job).exists()
    for job_id in (record[0][0], record[2][0]):
        assert execution_of(uuid.UUID(job_id)).status == ExecutionStatus.COMPLETED
    # A duplicate of the whole record is fenced: nothing runs twice.
    runner.deliveries_execute(record)
    assert ExecutionAttempt.objects.count() == 2


def test_an_executor_shutting_down_gives_back_what_it_did_not_start():
    record = dispatched_record([{"action": "LOG", "message": "x"}], 3)
    shutdown.begin(60)

    runner.deliveries_execute(record)

    for job_id, _, _ in record:
        execution = execution_of(uuid.UUID(job_id))
        assert (execution.status, execution.current_event_id) == (ExecutionStatus.PENDING, None)
        assert execution.redelivery_count == 1
    assert not ExecutionAttempt.objects.exists()  # no attempt used
    assert slots.waiting() == []
    assert check_invariants() == []


def test_a_delivery_twice_in_one_record_runs_once():
    record = dispatched_record([{"action": "LOG", "message": "x"}], 2)

    runner.deliveries_execute([*record, *record, record[0]])

    for job_id, event_id, _ in record:
        [attempt] = ExecutionAttempt.objects.filter(job_id=job_id)
        assert (str(attempt.event_id), attempt.outcome) == (event_id, "SUCCESS")
    assert check_invariants() == []
