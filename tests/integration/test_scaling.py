"""Several executor processes share the run-job partitions, and losing one loses no job."""

from __future__ import annotations

import collections
import signal

import pytest
from django.db.models import Count

from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.services import job_submit_batch
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import JobExecution
from tests.integration.helpers import assert_invariants
from tests.stack import wait_for

pytestmark = [pytest.mark.integration]


def live_executors(stack):
    stack.executors = [e for e in stack.executors if e.alive()]
    return stack.executors


def ensure_executors(stack, count: int) -> list:
    while len(live_executors(stack)) < count:
        stack.start_executor()
    executors = live_executors(stack)[:count]
    # Every one of them owns partitions of run-job (the group has rebalanced).
    wait_for(
        lambda: all(e.assigned_partitions() for e in live_executors(stack)),
        timeout=60,
        interval=0.2,
        message="every executor to own run-job partitions",
    )
    return executors


def submit_many(count: int, steps: list[dict]) -> set:
    """A burst: `count` jobs in one batch (one transaction, one dispatch), so the burst is
    under way at once however slow one-by-one submission would be on a loaded machine."""
    spec = parse_job_request({"jobType": "SIMULATION", "payload": {"steps": steps}})
    return {job.id for job in job_submit_batch(specs=[spec] * count)}


def wait_all_completed(job_ids: set, timeout: float) -> None:
    wait_for(
        lambda: (
            JobExecution.objects.filter(job_id__in=job_ids, status="COMPLETED").count()
            == len(job_ids)
        ),
        timeout=timeout,
        interval=0.5,
        message=f"all {len(job_ids)} jobs to complete",
    )


def assert_each_job_succeeded_once(job_ids: set) -> None:
    """Exactly one SUCCESS attempt per job, and every invariant of check_invariants holds."""
    assert_invariants(job_ids)
    per_job = (
        ExecutionAttempt.objects.filter(job_id__in=job_ids, outcome="SUCCESS")
        .values("job_id")
        .annotate(n=Count("event_id"))
    )
    counts = collections.Counter(row["n"] for row in per_job)
    assert counts == {1: len(job_ids)}, f"SUCCESS attempts per job: {dict(counts)}"


def runs_per_executor(job_ids: set, executors) -> dict[int, int]:
    pids = {e.pid for e in executors}
    runs = collections.Counter()
    for worker_id in ExecutionAttempt.objects.filter(job_id__in=job_ids).values_list(
        "worker_id", flat=True
    ):
        pid = int(worker_id.split(":")[1])
        runs[pid if pid in pids else "other"] += 1
    return dict(runs)


def test_three_executors_share_300_jobs(stack, live_db):
    executors = ensure_executors(stack, 3)

    job_ids = submit_many(300, [{"action": "SLEEP", "durationMs": 30}])
    wait_all_completed(job_ids, timeout=180)

    assert_each_job_succeeded_once(job_ids)
    runs = runs_per_executor(job_ids, executors)
    assert all(runs.get(e.pid, 0) > 0 for e in executors), f"runs per executor pid: {runs}"


def test_sigkill_of_an_executor_mid_burst_loses_no_job(stack, live_db):
    executors = ensure_executors(stack, 3)
    victim = executors[0]

    job_ids = submit_many(300, [{"action": "SLEEP", "durationMs": 100}])
    wait_for(
        lambda: (
            ExecutionAttempt.objects.filter(
                job_id__in=job_ids, worker_id__contains=f":{victim.pid}:", outcome="SUCCESS"
            ).count()
            >= 5
        ),
        timeout=60,
        message="the victim to be busy with the burst",
    )
    victim.signal(signal.SIGKILL)
    victim.process.wait(10)

    wait_all_completed(job_ids, timeout=240)
    assert_each_job_succeeded_once(job_ids)
    live_executors(stack)
