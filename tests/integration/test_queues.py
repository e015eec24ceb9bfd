"""Queues that route, with real executors (ARCHITECTURE §15): a pool serving `gpu` runs every
`gpu` job and nothing else; work of a queue nobody serves waits, unattempted, until an executor
for it starts, and waits again once it stops. The same rules without workers:
apps/scheduler/tests/test_queues.py."""

from __future__ import annotations

import time

import pytest

from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.services import job_submit_batch
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import JobExecution
from tests.integration.helpers import assert_invariants
from tests.stack import child_environment, wait_for

pytestmark = [pytest.mark.integration]

# Queues outside the test stack's own (JOBWEAVER_EXECUTOR_QUEUES in settings_test).
GPU, NIGHTLY = "gpu", "nightly"
STEPS = [{"action": "SLEEP", "durationMs": 20}]


def submit(queue: str, count: int) -> set:
    spec = parse_job_request(
        {"jobType": "SIMULATION", "payload": {"steps": STEPS}, "queueName": queue}
    )
    return {job.id for job in job_submit_batch(specs=[spec] * count)}


def start_pool(stack, name: str, queue: str):
    env = {**child_environment(), "JOBWEAVER_EXECUTOR_QUEUES": queue}
    executor = stack.start_executor(name, env=env)
    wait_for(
        lambda: executor.assigned_partitions(),
        timeout=60,
        interval=0.2,
        message=f"{name} to own run-job partitions",
    )
    return executor


def completed(job_ids: set) -> bool:
    done = JobExecution.objects.filter(job_id__in=job_ids, status="COMPLETED").count()
    return done == len(job_ids)


def pids_that_ran(job_ids: set) -> set[int]:
    workers = ExecutionAttempt.objects.filter(job_id__in=job_ids).values_list(
        "worker_id", flat=True
    )
    return {int(worker_id.split(":")[1]) for worker_id in workers}


def test_every_job_runs_on_an_executor_that_serves_its_queue(stack, live_db):
    gpu = start_pool(stack, "executor-gpu", GPU)
    try:
        default_jobs, gpu_jobs = submit("default", 50), submit(GPU, 50)
        wait_for(
            lambda: completed(default_jobs | gpu_jobs),
            timeout=120,
            interval=0.5,
            message="both queues' jobs to complete",
        )

        assert pids_that_ran(gpu_jobs) == {gpu.pid}
        assert gpu.pid not in pids_that_ran(default_jobs)
        assert_invariants(default_jobs | gpu_jobs)
    finally:
        gpu.stop()
        stack.executors.remove(gpu)


def assert_stays_pending(job_ids: set, seconds: float) -> None:
    """Through `seconds` of dispatch rounds and rescues, the jobs stay PENDING, unattempted:
    a negative can only be watched for a while, so it is watched the whole while."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        executions = JobExecution.objects.filter(job_id__in=job_ids)
        assert set(executions.values_list("status", flat=True)) == {"PENDING"}
        time.sleep(0.25)
    assert not ExecutionAttempt.objects.filter(job_id__in=job_ids).exists()


def test_work_nobody_serves_waits_and_an_executor_for_it_drains_it(stack, live_db, settings):
    rounds = 4 * settings.JOBWEAVER_DISPATCH_INTERVAL_SECONDS + 2  # several dispatches, rescues
    waiting = submit(NIGHTLY, 5)
    assert_stays_pending(waiting, rounds)

    nightly = start_pool(stack, "executor-nightly", NIGHTLY)
    try:
        wait_for(
            lambda: completed(waiting),
            timeout=60,
            interval=0.5,
            message="the nightly executor to drain its queue",
        )
        assert pids_that_ran(waiting) == {nightly.pid}
    finally:
        nightly.stop()
        stack.executors.remove(nightly)

    later = submit(NIGHTLY, 3)
    assert_stays_pending(later, rounds)
    assert_invariants(waiting)
