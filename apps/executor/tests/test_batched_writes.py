"""Claims and successes written many to a statement (issue 34): each row fenced by its own
token, a refused row unchanged, every started job's attempt opened and every completed job's
attempt closed and its JobCompleted event written in the same statement; and, with real
threads and connections, attempts that end together share statements while each thread returns
only after its own row committed."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from django.db import connection

from jobweaver.core.groupcommit import GroupCommit
from jobweaver.core.kafka import JOB_COMPLETED
from jobweaver.engine import executions
from jobweaver.engine.ledger import AttemptReport
from jobweaver.executor import services
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.executor.services import attempt_finish
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.invariants import check_invariants
from jobweaver.scheduler.models import ExecutionStatus
from jobweaver.scheduler.tests.factories import (
    EXECUTOR,
    dispatched,
    execution_of,
    started,
    submitted_job,
)

LOG = [{"action": "LOG", "message": "x"}]


@pytest.mark.django_db
def test_one_statement_starts_every_current_delivery_and_leaves_the_others():
    jobs = [submitted_job(LOG).id for _ in range(3)]
    unserved = submitted_job(LOG, queueName="reports").id
    deliveries = [(job_id, dispatched(job_id), f"{EXECUTOR}:t{n}") for n, job_id in enumerate(jobs)]
    stale = (jobs[0], uuid.uuid4(), f"{EXECUTOR}:t9")
    elsewhere = (unserved, dispatched(unserved), f"{EXECUTOR}:t8")

    started_ = executions.executions_start([*deliveries, stale, elsewhere], serves=["default"])

    assert set(started_) == {(job_id, event_id) for job_id, event_id, _ in deliveries}
    for job_id, event_id, worker_id in deliveries:
        assert started_[job_id, event_id].attempt == 1
        assert started_[job_id, event_id].instruction == {"steps": LOG}
        execution = execution_of(job_id)
        assert (execution.status, execution.worker_id) == ("RUNNING", EXECUTOR)
        attempt = ExecutionAttempt.objects.get(event_id=event_id)
        assert (attempt.worker_id, attempt.outcome, attempt.attempt) == (worker_id, "RUNNING", 1)
        assert attempt.started_at == execution.started_at
    assert ExecutionAttempt.objects.filter(event_id=stale[1]).count() == 0
    # Not served here: still DISPATCHED, for the executor to hand back (execution_hand_back).
    assert execution_of(unserved).status == ExecutionStatus.DISPATCHED
    assert ExecutionAttempt.objects.filter(job_id=unserved).count() == 0
    assert check_invariants() == []


@pytest.mark.django_db
def test_one_statement_completes_every_current_token_and_refuses_the_stale_one():
    jobs = [submitted_job(LOG).id for _ in range(4)]
    claims = [started(job_id) for job_id in jobs]
    stale = (jobs[3], uuid.uuid4(), AttemptReport(steps_completed=1, log_lines=["late"]))
    batch = [
        (c.job_id, c.event_id, AttemptReport(steps_completed=1, log_lines=[f"line {n}"]))
        for n, c in enumerate(claims[:3])
    ]
    batch[2] = (*batch[2][:2], AttemptReport(steps_completed=1, log_lines=["r"], result={"x": 1}))

    completed = executions.executions_complete([*batch, stale])

    assert completed == set(jobs[:3])
    for n, claim in enumerate(claims[:3]):
        assert execution_of(claim.job_id).status == ExecutionStatus.COMPLETED
        attempt = ExecutionAttempt.objects.get(event_id=claim.event_id)
        assert (attempt.outcome, attempt.steps_completed) == ("SUCCESS", 1)
        assert attempt.finished_at == execution_of(claim.job_id).finished_at
        assert attempt.log_lines == (["r"] if n == 2 else [f"line {n}"])
    assert ExecutionAttempt.objects.get(event_id=claims[2].event_id).result == {"x": 1}
    # The stale delivery changed nothing: its job still runs under its real token.
    assert execution_of(jobs[3]).status == ExecutionStatus.RUNNING
    assert ExecutionAttempt.objects.get(event_id=claims[3].event_id).outcome == "RUNNING"
    completed_events = OutboxEvent.objects.filter(topic__endswith=JOB_COMPLETED)
    assert sorted(e.key for e in completed_events) == sorted(str(j) for j in jobs[:3])
    assert check_invariants() == []


@pytest.mark.django_db
def test_a_repeated_completion_is_refused():
    claim = started(submitted_job(LOG).id)
    report = AttemptReport(steps_completed=1, log_lines=["x"])
    assert executions.executions_complete([(claim.job_id, claim.event_id, report)]) == {
        claim.job_id
    }
    assert executions.executions_complete([(claim.job_id, claim.event_id, report)]) == set()
    assert (
        OutboxEvent.objects.filter(key=str(claim.job_id), topic__endswith=JOB_COMPLETED).count()
        == 1
    )


@pytest.mark.django_db(transaction=True)
def test_attempts_ending_together_share_statements_and_each_returns_after_its_commit(
    monkeypatch,
):
    # Committed submits would be dispatched by their fast path: the test dispatches each itself.
    monkeypatch.setattr("jobweaver.jobs.services.dispatch_job_now", lambda job_id: None)
    threads_count = 12
    claims = [started(submitted_job(LOG).id) for _ in range(threads_count)]
    all_queued = threading.Event()
    sizes: list[int] = []

    def write(completions: list) -> list[bool]:
        sizes.append(len(completions))
        # The first write waits until every other thread has queued its success, so the test
        # does not depend on how the threads happen to be scheduled.
        if not all_queued.is_set():
            deadline = time.monotonic() + 10
            while len(writer._queue) < threads_count - len(completions):
                assert time.monotonic() < deadline, "the other threads never queued"
                time.sleep(0.001)
            all_queued.set()
        return services.complete_batch(completions)

    writer = GroupCommit(write, max_batch=5)
    monkeypatch.setattr(services, "_writer", writer)
    go = threading.Barrier(threads_count)
    seen_committed: dict[uuid.UUID, str] = {}

    def finish(claim) -> None:
        try:
            go.wait(timeout=10)
            assert attempt_finish(claimed=claim, outcome="SUCCESS", steps_completed=1, log_lines=[])
            # Back from attempt_finish: the row is committed, as another connection sees it.
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT status FROM jobweaver_scheduler_jobexecution WHERE job_id = %s",
                    [claim.job_id],
                )
                seen_committed[claim.job_id] = cursor.fetchone()[0]
        finally:
            connection.close()

    threads = [threading.Thread(target=finish, args=(claim,)) for claim in claims]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive()

    assert seen_committed == {claim.job_id: "COMPLETED" for claim in claims}
    # The first statement takes what had queued when it began; the rest queued meanwhile and
    # go five to a statement.
    assert sum(sizes) == threads_count
    assert max(sizes) <= 5 and all(size == 5 for size in sizes[1:-1])
    assert len(sizes) <= 4
    assert check_invariants() == []


@pytest.mark.django_db
def test_the_start_statements_warm_up_changes_nothing():
    """An executor runs the start statement on each task thread's new connection before it
    registers (apps/executor/tasks.py): the fence refuses its delivery, so nothing moves."""
    job = submitted_job(LOG).id
    dispatched(job)
    attempts = ExecutionAttempt.objects.count()

    services.attempts_start_warm_up(worker_id=f"{EXECUTOR}:MainThread")

    assert execution_of(job).status == ExecutionStatus.DISPATCHED
    assert ExecutionAttempt.objects.count() == attempts
