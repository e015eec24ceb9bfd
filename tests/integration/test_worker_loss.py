"""Executors lost in the middle of a SLEEP step, on real worker processes: one is killed
(SIGKILL), one is paused past its lease (SIGSTOP) and woken again (SIGCONT).

Either way the lease runs out, beat's rescue records the attempt LOST and schedules a retry,
another executor completes the job, and the lost worker can change nothing afterwards: its
fencing token is gone. Kafka hands the lost member's partitions to the survivor only after the
group's session timeout (10 s), so completion may take that long; the rescue itself must come
within one lease plus one rescue interval.
"""

from __future__ import annotations

import signal
import threading
import uuid

import pytest
from django.conf import settings
from django.utils import timezone

from jobweaver.executor.models import ExecutionAttempt
from jobweaver.scheduler.models import JobExecution
from tests.integration.helpers import (
    assert_invariants,
    attempts_of,
    live_executors,
    running_attempt,
    submit,
    token_client,
    wait_for_status,
    worker_pid,
)
from tests.stack import WorkerProcess, wait_for

pytestmark = [pytest.mark.integration]

LEASE = settings.JOBWEAVER_LEASE_SECONDS
RESCUE_INTERVAL = settings.JOBWEAVER_RESCUE_INTERVAL_SECONDS
# Beat's lateness, the scheduler worker's queue and a loaded 2-core machine.
SLACK = 2.0
IN_SLEEP = [
    {"action": "LOG", "message": "before the sleep"},
    {"action": "SLEEP", "durationMs": 4000},
]


def executor_running(stack, attempt: ExecutionAttempt) -> WorkerProcess:
    [worker] = [worker for worker in stack.executors if worker.pid == worker_pid(attempt)]
    return worker


def wait_until_lost(attempt: ExecutionAttempt) -> ExecutionAttempt:
    return wait_for(
        lambda: ExecutionAttempt.objects.filter(event_id=attempt.event_id, outcome="LOST").first(),
        timeout=LEASE + RESCUE_INTERVAL + 20,
        message=f"attempt {attempt.event_id} to be rescued as LOST",
    )


def test_sigkill_during_sleep_the_job_is_rescued_and_completes_on_another_worker(stack, live_db):
    live_executors(stack, 2)
    job_id = submit(token_client(), IN_SLEEP, maxRetryCount=2)
    attempt = running_attempt(job_id)
    victim = executor_running(stack, attempt)

    killed_at = timezone.now()
    victim.signal(signal.SIGKILL)
    victim.process.wait(10)
    stack.executors.remove(victim)
    final_lease = JobExecution.objects.get(job_id=job_id).lease_expires_at

    lost = wait_until_lost(attempt)
    wait_for_status(job_id, "COMPLETED", timeout=60)

    time_to_rescue = (lost.finished_at - killed_at).total_seconds()
    after_expiry = (lost.finished_at - final_lease).total_seconds()
    execution = JobExecution.objects.get(job_id=job_id)
    recovered = (execution.finished_at - killed_at).total_seconds()
    print(
        f"\nSIGKILL: rescued {time_to_rescue:.2f} s after the kill, {after_expiry:.2f} s after "
        f"the lease expired (lease {LEASE:g} s, rescue interval {RESCUE_INTERVAL:g} s); "
        f"completed {recovered:.2f} s after the kill"
    )
    assert time_to_rescue <= LEASE + RESCUE_INTERVAL + SLACK
    assert 0 <= after_expiry <= RESCUE_INTERVAL + SLACK
    attempts = attempts_of(job_id)
    assert [(a.attempt, a.outcome) for a in attempts] == [(1, "LOST"), (2, "SUCCESS")]
    assert worker_pid(attempts[0]) == victim.pid
    assert worker_pid(attempts[1]) != victim.pid
    assert attempts[0].steps_completed == 1  # it was lost inside the SLEEP step
    assert attempts[0].error_message.startswith("worker lost: lease expired at ")
    assert (execution.retry_count, execution.attempt_count) == (1, 2)
    assert_invariants([job_id])
    assert any(worker.alive() for worker in stack.executors)


def test_sigstop_past_the_lease_then_sigcont_the_paused_worker_is_fenced_off(stack, live_db):
    live_executors(stack, 2)
    job_id = submit(token_client(), IN_SLEEP, maxRetryCount=2)
    attempt = running_attempt(job_id)
    victim = executor_running(stack, attempt)

    stopped_at = timezone.now()
    victim.signal(signal.SIGSTOP)
    try:
        lost = wait_until_lost(attempt)
        wait_for_status(job_id, "COMPLETED", timeout=60)
    finally:
        victim.signal(signal.SIGCONT)
    completed = JobExecution.objects.get(job_id=job_id)

    # Awake again inside its SLEEP step, the worker's next heartbeat finds its token gone: it
    # stops and records nothing.
    fenced = f"job {job_id} attempt 1 stopped (lease lost or cancellation requested) and rejected"
    wait_for(
        lambda: fenced in victim.log_text(),
        timeout=30,
        message=f"the woken executor to report the fence:\n{victim.log_text()[-3000:]}",
    )

    time_to_rescue = (lost.finished_at - stopped_at).total_seconds()
    recovered = (completed.finished_at - stopped_at).total_seconds()
    print(
        f"\nSIGSTOP: rescued {time_to_rescue:.2f} s after the pause, completed elsewhere "
        f"{recovered:.2f} s after it"
    )
    assert time_to_rescue <= LEASE + RESCUE_INTERVAL + SLACK
    attempts = attempts_of(job_id)
    assert [(a.attempt, a.outcome) for a in attempts] == [(1, "LOST"), (2, "SUCCESS")]
    assert worker_pid(attempts[0]) == victim.pid
    assert worker_pid(attempts[1]) != victim.pid
    # The woken worker changed nothing: its attempt is as the rescue left it, the job as the
    # second worker left it.
    assert (attempts[0].finished_at, attempts[0].error_message, attempts[0].steps_completed) == (
        lost.finished_at,
        lost.error_message,
        1,
    )
    execution = JobExecution.objects.get(job_id=job_id)
    assert (execution.status, execution.version) == ("COMPLETED", completed.version)
    assert_invariants([job_id])
    live_executors(stack, 1)


def test_sigkill_with_a_batch_of_successes_half_written_loses_nothing_and_completes_nothing_twice(
    stack, live_db
):
    """Issue 34: an executor's successes wait together in one statement (group commit). Here
    that statement is held mid-write — the test locks the attempts' rows, so the statement has
    moved the executions and waits to close the attempts, uncommitted — and the executor is
    killed. Whatever then happens to the orphaned statement (it may still commit once the lock
    goes, or the rescue takes the jobs back), every job completes exactly once: one SUCCESS
    attempt, one JobCompleted event, no violation."""
    from django.db import connection, transaction

    from jobweaver.core.kafka import JOB_COMPLETED
    from jobweaver.outbox.models import OutboxEvent

    live_executors(stack, 2)
    client = token_client()
    steps = [{"action": "LOG", "message": "x"}, {"action": "SLEEP", "durationMs": 3000}]
    jobs = [submit(client, steps) for _ in range(4)]
    first = running_attempt(jobs[0])
    victim_pid = worker_pid(first)
    [victim] = [worker for worker in stack.executors if worker.pid == victim_pid]
    locked, release = threading.Event(), threading.Event()
    held: list = []

    def hold_the_rows() -> None:
        # The RUNNING attempts of the victim (a heartbeat touches only executions).
        try:
            with transaction.atomic():
                rows = ExecutionAttempt.objects.select_for_update().filter(
                    job_id__in=jobs, outcome="RUNNING", worker_id__contains=f":{victim_pid}:"
                )
                held.extend(row.job_id for row in rows)
                locked.set()
                release.wait(timeout=60)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_the_rows)
    holder.start()
    try:
        assert locked.wait(timeout=10)
        assert held, "the victim ran none of the jobs any more"

        def successes_waiting() -> bool:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE %s",
                    ["%jsonb_to_recordset%"],
                )
                return cursor.fetchone()[0] > 0

        wait_for(successes_waiting, timeout=20, message="the victim's successes to be written")
        victim.signal(signal.SIGKILL)
        victim.process.wait(10)
        stack.executors.remove(victim)
    finally:
        release.set()
        holder.join(timeout=30)
    live_executors(stack, 2)

    for job_id in jobs:
        wait_for_status(job_id, "COMPLETED", timeout=90)
    for job_id in jobs:
        outcomes = [attempt.outcome for attempt in attempts_of(job_id)]
        print(f"\njob {job_id} (held: {uuid.UUID(job_id) in held}): {outcomes}")
        assert outcomes.count("SUCCESS") == 1, (job_id, outcomes)
        assert set(outcomes) <= {"SUCCESS", "LOST"}, (job_id, outcomes)
        completed = OutboxEvent.objects.filter(topic__endswith=JOB_COMPLETED, key=str(job_id))
        assert completed.count() == 1, job_id
    assert_invariants(jobs)


def test_sigkill_with_a_record_of_several_jobs_half_run_loses_nothing_and_runs_nothing_twice(
    stack, live_db
):
    """Issue 34: a run-job record brings an executor several jobs at once; it runs as many as
    it has slots and holds the others in its line. Killed then, its running attempts are
    rescued (LOST, run again elsewhere), the deliveries in its line are sent again with no
    attempt used, and every job completes exactly once."""
    from jobweaver.core.kafka import JOB_COMPLETED
    from jobweaver.outbox.models import OutboxEvent

    live_executors(stack, 2)
    slots = settings.JOBWEAVER_EXECUTOR_CONCURRENCY
    # More than both executors' slots: each gets a record of several, some of them in line.
    count = 3 * slots
    body = {"jobType": "SIMULATION", "payload": {"steps": IN_SLEEP}}
    response = token_client().post(
        "/api/jobs/batch",
        {"jobs": [{**body, "maxRetryCount": 2} for _ in range(count)]},
        format="json",
    )
    assert response.status_code == 202, response.content
    jobs = [job["jobId"] for job in response.json()["jobs"]]

    def victim_with_a_line():
        for worker in stack.executors:
            mine = JobExecution.objects.filter(
                job_id__in=jobs, worker_id__endswith=f":{worker.pid}"
            )
            running = mine.filter(status="RUNNING").count()
            if running == slots and mine.filter(status="DISPATCHED").exists():
                return worker
        return None

    victim = wait_for(victim_with_a_line, timeout=30, message="an executor with a full line")
    in_line = set(
        JobExecution.objects.filter(
            job_id__in=jobs, status="DISPATCHED", worker_id__endswith=f":{victim.pid}"
        ).values_list("job_id", flat=True)
    )
    victim.signal(signal.SIGKILL)
    victim.process.wait(10)
    stack.executors.remove(victim)
    live_executors(stack, 2)

    for job_id in jobs:
        wait_for_status(job_id, "COMPLETED", timeout=90)
    for job_id in jobs:
        outcomes = [attempt.outcome for attempt in attempts_of(job_id)]
        assert outcomes.count("SUCCESS") == 1, (job_id, outcomes)
        assert set(outcomes) <= {"SUCCESS", "LOST"}, (job_id, outcomes)
        completed = OutboxEvent.objects.filter(topic__endswith=JOB_COMPLETED, key=str(job_id))
        assert completed.count() == 1, job_id
    for job_id in in_line:  # never started on the victim: sent again, no attempt used
        execution = JobExecution.objects.get(job_id=job_id)
        lost = [a for a in attempts_of(job_id) if a.outcome == "LOST"]
        assert not [a for a in lost if worker_pid(a) == victim.pid], job_id
        assert execution.redelivery_count >= 1, job_id
    assert_invariants(jobs)
