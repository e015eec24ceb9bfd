"""The process pool (`--pool processes`, ARCHITECTURE §13a) on real executors: a task that
never returns is killed at its hard timeout and its slot runs the next job at once; a child
that dies fails only its attempt; CPU-bound tasks use both cores; simulation jobs, async
tasks, snoozes and cancels behave as on the threads pool; an executor SIGKILLed mid-attempt
loses nothing and leaves no child behind. Each module-scoped executor serves a queue of its
own, so only it runs these jobs. The pool's mechanics without Kafka:
apps/executor/tests/test_process_pool.py."""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from jobweaver.jobs.services import job_submit_batch
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import JobExecution
from jobweaver_site.examples.tasks import add, async_add, crash, fib, sleep, snoozer, spin
from tests.integration.helpers import (
    assert_invariants,
    attempts_of,
    wait_for_status,
    worker_pid,
)
from tests.stack import child_environment, wait_for

pytestmark = [pytest.mark.integration]

ISOLATED, THREADED, VICTIM, STOPPING = "isolated", "threaded", "victim", "stopping"
# settings_test: JOBWEAVER_HARD_TIMEOUT_GRACE_SECONDS = 1.
GRACE = 1
# fib(30) takes 0.08 s on this machine, too little against a job's start-up to compare the
# pools; fib(34) takes about 0.55 s, so the hand-overs weigh little (bench/NOTES.md).
FIB_N = 34


def start_executor(stack, name: str, queue: str, *, pool: str, **env):
    environment = {
        **child_environment(),
        "JOBWEAVER_EXECUTOR_QUEUES": queue,
        "JOBWEAVER_EXECUTOR_POOL": pool,
        **env,
    }
    executor = stack.start_executor(name, env=environment, threads=2)
    wait_for(executor.assigned_partitions, timeout=60, interval=0.2, message=f"{name} partitions")
    return executor


@pytest.fixture(scope="module")
def isolated(stack):
    """A process-pool executor of 2 children, each replaced after 3 attempts."""
    executor = start_executor(
        stack,
        "executor-processes",
        ISOLATED,
        pool="processes",
        JOBWEAVER_EXECUTOR_MAX_TASKS_PER_CHILD="3",
    )
    yield executor
    executor.stop()
    stack.executors.remove(executor)


@pytest.fixture(scope="module")
def threaded(stack):
    executor = start_executor(stack, "executor-threads2", THREADED, pool="threads")
    yield executor
    executor.stop()
    stack.executors.remove(executor)


def on(task, queue: str = ISOLATED, **options):
    return task.using(queue_name=queue).with_options(**options)


def seconds(attempt) -> float:
    return (attempt.finished_at - attempt.started_at).total_seconds()


def test_tasks_of_every_kind_run_in_the_children(isolated, live_db):
    added, asynchronous = on(add).enqueue(2, 3), on(async_add).enqueue(4, 5)
    snoozed = on(snoozer, max_retries=0).enqueue(2)

    for result in (added, asynchronous, snoozed):
        wait_for_status(result.id, "COMPLETED", timeout=60)

    assert add.get_result(added.id).return_value == 5
    assert async_add.get_result(asynchronous.id).return_value == 9
    assert [a.outcome for a in attempts_of(snoozed.id)] == ["SNOOZED"] * 2 + ["SUCCESS"]
    assert snoozer.get_result(snoozed.id).return_value == 3
    for result in (added, asynchronous, snoozed):
        assert {worker_pid(a) for a in attempts_of(result.id)} == {isolated.pid}
    assert_invariants([added.id, asynchronous.id, snoozed.id])


def test_spin_past_its_timeout_is_killed_at_the_hard_timeout_and_the_slot_goes_on(
    isolated, live_db
):
    spinners = [on(spin, timeout_seconds=2, max_retries=0).enqueue(60) for _ in range(2)]
    for result in spinners:
        wait_for_status(result.id, "RUNNING", timeout=60)
    waiting = [on(add).enqueue(n, n) for n in range(2)]  # both slots spin: these wait

    for result in spinners:
        wait_for_status(result.id, "FAILED", timeout=30)
    for result in waiting:
        wait_for_status(result.id, "COMPLETED", timeout=30)

    killed_at = []
    for result in spinners:
        [attempt] = attempts_of(result.id)
        assert (attempt.outcome, attempt.error_message) == (
            "FAILURE",
            f"killed at the hard timeout after {2 + GRACE} s",
        )
        assert 2 + GRACE <= seconds(attempt) < 2 + GRACE + 1.5, seconds(attempt)
        killed_at.append(attempt.finished_at)
    started = [attempts_of(result.id)[0].started_at for result in waiting]
    # The killed children were replaced before their slots took the next jobs.
    assert max(started) < max(killed_at) + timezone.timedelta(seconds=1)
    assert isolated.alive()
    assert_invariants([r.id for r in spinners + waiting])


def test_a_child_that_dies_fails_only_its_attempt_and_is_retried(isolated, live_db):
    crashed = on(crash, max_retries=1, retry_backoff=(1, 1)).enqueue()
    wait_for_status(crashed.id, "FAILED", timeout=60)
    after = on(add).enqueue(1, 2)
    wait_for_status(after.id, "COMPLETED", timeout=60)

    assert [(a.outcome, a.error_message) for a in attempts_of(crashed.id)] == [
        ("FAILURE", "worker process died (exit code 1)")
    ] * 2
    assert JobExecution.objects.get(job_id=crashed.id).retry_count == 1
    assert isolated.alive()
    assert worker_pid(attempts_of(after.id)[0]) == isolated.pid
    assert_invariants([crashed.id, after.id])


def test_a_cooperative_task_stops_at_its_timeout_and_on_a_cancel(isolated, live_db):
    timed = on(sleep, timeout_seconds=1, max_retries=0).enqueue(30)
    wait_for_status(timed.id, "FAILED", timeout=60)
    [attempt] = attempts_of(timed.id)
    # It saw is_cancelled() at the timeout and returned within the grace: no kill.
    assert (attempt.outcome, attempt.error_message) == (
        "FAILURE",
        "timed out after 1 s (timeoutSeconds)",
    )
    assert 1.0 <= seconds(attempt) < 1 + GRACE

    long = on(sleep).enqueue(60)
    wait_for(
        lambda: attempts_of(long.id) and attempts_of(long.id)[0].total_steps == 60,
        timeout=60,
        message="the sleep task to report progress",
    )
    operator = get_user_model().objects.create_superuser(f"ops-{uuid.uuid4().hex[:8]}", "", "pw")
    client = APIClient()
    client.force_authenticate(operator)
    requested = timezone.now()
    assert client.post(f"/api/jobs/{long.id}/cancel").status_code == 200
    wait_for_status(long.id, "CANCELLED", timeout=10)
    [attempt] = attempts_of(long.id)
    assert attempt.outcome == "CANCELLED"
    assert (attempt.finished_at - requested).total_seconds() < 1.0
    assert_invariants([timed.id, long.id])


def test_simulation_jobs_run_in_the_children_with_their_logs_and_progress(isolated, live_db):
    steps = [
        {"action": "LOG", "message": "in a child"},
        {"action": "COMPUTE", "iterations": 100_000},
        {"action": "SLEEP", "durationMs": 100},
        {"action": "LOG", "message": "still there"},
    ]
    ok, failing = (
        parse_job_request(
            {"jobType": "SIMULATION", "payload": {"steps": body}, "queueName": ISOLATED}
        )
        for body in (steps, [{"action": "FAIL", "message": "no", "retryable": False}])
    )
    ok_job, failing_job = job_submit_batch(specs=[ok, failing])

    wait_for_status(ok_job.id, "COMPLETED", timeout=60)
    wait_for_status(failing_job.id, "FAILED", timeout=60)

    [attempt] = attempts_of(ok_job.id)
    assert (attempt.steps_completed, attempt.total_steps) == (4, 4)
    assert attempt.log_lines == ["in a child", "still there"]
    [failed] = attempts_of(failing_job.id)
    assert (failed.outcome, failed.error_message, failed.exception_type) == ("FAILURE", "no", "")
    assert "retired after 3 attempts" in isolated.log_text()  # --max-tasks-per-child 3
    assert_invariants([ok_job.id, failing_job.id])


def test_cpu_bound_tasks_use_both_cores(isolated, threaded, live_db):
    def wall_time(queue: str) -> float:
        results = [on(fib, queue).enqueue(FIB_N) for _ in range(4)]
        for result in results:
            wait_for_status(result.id, "COMPLETED", timeout=60)
        attempts = [attempts_of(result.id)[0] for result in results]
        assert {fib.get_result(r.id).return_value for r in results} == {5702887}
        return (
            max(a.finished_at for a in attempts) - min(a.started_at for a in attempts)
        ).total_seconds()

    # Two rounds, interleaved, the best of each: a round that shared the two cores with the
    # rest of the suite's processes measures the machine's load, not the pool.
    rounds = [(wall_time(THREADED), wall_time(ISOLATED)) for _ in range(2)]
    threads, processes = min(r[0] for r in rounds), min(r[1] for r in rounds)

    print(f"\nfour fib({FIB_N}): threads pool {threads:.2f} s, process pool {processes:.2f} s")
    # The threads pool runs the four on one core (the GIL); on both cores the process pool
    # takes half that at best, on one core all of it or more. The suite's other processes
    # compete only for the process pool's second core, so under load the ratio rises above
    # 0.5 (bench/NOTES.md): the bound sits between that and one core's 1.0.
    assert processes <= 0.7 * threads


def test_a_sigkilled_executor_loses_nothing_and_leaves_no_child(stack, live_db):
    victim = start_executor(stack, "executor-victim", VICTIM, pool="processes")
    result = on(sleep, VICTIM, max_retries=2).enqueue(3)
    running = wait_for(
        lambda: next((a for a in attempts_of(result.id) if a.total_steps == 3), None),
        timeout=60,
        message="the sleep task to run",
    )
    assert worker_pid(running) == victim.pid

    victim.signal(signal.SIGKILL)
    victim.process.wait(10)
    # The forkserver and the children are in the executor's session; all of them go.
    wait_for(lambda: not in_session(victim.pid), timeout=10, message="the children to exit")
    stack.executors.remove(victim)
    survivor = start_executor(stack, "executor-survivor", VICTIM, pool="processes")
    try:
        wait_for_status(result.id, "COMPLETED", timeout=90)
    finally:
        survivor.stop()
        stack.executors.remove(survivor)

    assert [a.outcome for a in attempts_of(result.id)] == ["LOST", "SUCCESS"]
    assert worker_pid(attempts_of(result.id)[1]) == survivor.pid
    assert_invariants([result.id])


def test_a_graceful_shutdown_waits_for_the_children_within_its_grace(stack, live_db):
    """SIGTERM: an attempt that ends within the grace period (2 s) completes, one that does
    not is released (LOST, due again at once, no retry used); then every child exits."""
    stopping = start_executor(stack, "executor-stopping", STOPPING, pool="processes")
    short, long = on(sleep, STOPPING).enqueue(1), on(sleep, STOPPING).enqueue(30)
    for result in (short, long):
        wait_for(
            lambda result=result: any(a.total_steps for a in attempts_of(result.id)),
            timeout=60,
            message="both sleep tasks to run",
        )

    stopping.signal(signal.SIGTERM)
    stopping.process.wait(30)
    stack.executors.remove(stopping)

    wait_for(lambda: not in_session(stopping.pid), timeout=10, message="the children to exit")
    assert [a.outcome for a in attempts_of(short.id)] == ["SUCCESS"]
    assert [a.outcome for a in attempts_of(long.id)] == ["LOST"]
    execution = JobExecution.objects.get(job_id=long.id)
    assert (execution.status, execution.retry_count) == ("PENDING", 0)
    assert_invariants([short.id, long.id])


def in_session(session: int) -> list[int]:
    """The live processes of a session (the executor was started as its leader)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            members.append(int(entry.name))
    return members
