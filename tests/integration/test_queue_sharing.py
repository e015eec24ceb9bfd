"""A queue's cap and weight with real executors (ARCHITECTURE §15): a pool of three executors
of 4 threads serving queues of their own; a capped queue never has more jobs running than its
cap; a flood in one queue does not starve a queue whose work arrives later; weights 3:1 share
the dispatches 3:1 while both wait; an executor joining the pool mid-flood routes nothing
wrongly. The rule without workers: apps/scheduler/tests/test_queues.py; full-size runs:
bench/queues.py."""

from __future__ import annotations

import pytest

from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.services import job_submit_batch
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import JobExecution, Queue
from tests.integration.helpers import assert_invariants
from tests.stack import child_environment, stop_together, wait_for

pytestmark = [pytest.mark.integration]

# Queues outside the test stack's own (settings_test): only this module's pool serves them.
CAPPED, FLOOD, LATE, MID = "capped", "flood", "late", "mid"
POOL_QUEUES = ",".join([CAPPED, FLOOD, LATE, MID])
POOL_SIZE, THREADS = 3, 4


def start_member(stack, name: str):
    env = {**child_environment(), "JOBWEAVER_EXECUTOR_QUEUES": POOL_QUEUES}
    executor = stack.start_executor(name, env=env, threads=THREADS)
    wait_for(executor.assigned_partitions, timeout=60, interval=0.2, message=f"{name} partitions")
    return executor


@pytest.fixture(scope="module")
def pool(stack):
    members = [start_member(stack, f"executor-pool{n}") for n in range(POOL_SIZE)]
    yield members
    leaving = [member for member in members if member in stack.executors]
    stop_together(leaving)
    for member in leaving:
        stack.executors.remove(member)


@pytest.fixture
def queue_settings(live_db):
    yield
    Queue.objects.filter(name__in=POOL_QUEUES.split(",")).delete()


def submit(queue: str, count: int, sleep_ms: int) -> list:
    spec = parse_job_request(
        {
            "jobType": "SIMULATION",
            "payload": {"steps": [{"action": "SLEEP", "durationMs": sleep_ms}]},
            "queueName": queue,
        }
    )
    return [job.id for job in job_submit_batch(specs=[spec] * count)]


def completed_count(job_ids) -> int:
    return JobExecution.objects.filter(job_id__in=job_ids, status="COMPLETED").count()


def wait_completed(job_ids, timeout: float = 120) -> None:
    wait_for(
        lambda: completed_count(job_ids) == len(job_ids),
        timeout=timeout,
        interval=0.25,
        message=f"{len(job_ids)} jobs to complete",
    )


def most_at_once(job_ids) -> int:
    """The most attempts of these jobs that ran at the same time, from their start and finish."""
    edges = []
    for started, finished in ExecutionAttempt.objects.filter(job_id__in=job_ids).values_list(
        "started_at", "finished_at"
    ):
        edges += [(started, 1), (finished, -1)]
    running = peak = 0
    for _, step in sorted(edges, key=lambda edge: (edge[0], edge[1])):  # a finish before a start
        running += step
        peak = max(peak, running)
    return peak


def test_a_capped_queue_never_runs_more_than_its_cap_across_the_pool(pool, queue_settings):
    Queue.objects.create(name=CAPPED, max_running=2)
    jobs = submit(CAPPED, 16, sleep_ms=150)

    wait_completed(jobs)

    assert most_at_once(jobs) == 2  # never more, and reached
    workers = set(ExecutionAttempt.objects.filter(job_id__in=jobs).values_list("worker_id"))
    assert len(workers) >= 2, "the cap is global: several executors took its work"
    assert_invariants(jobs)


def test_a_flood_does_not_starve_a_queue_whose_work_arrives_later(pool, queue_settings):
    flood = submit(FLOOD, 400, sleep_ms=100)
    late = submit(LATE, 20, sleep_ms=100)
    # The flood ran while the 400 were submitted, for longer on a busier machine: what it did
    # before the late work arrived is its head start, not the late queue's wait.
    flood_done_when_late_arrived = completed_count(flood)

    wait_completed(late, timeout=60)
    flood_done_meanwhile = completed_count(flood) - flood_done_when_late_arrived
    wait_completed(flood)

    # Equal weights: the late queue gets half the pool's slots at once, so its 20 jobs are
    # done long before a quarter of the flood runs (behind the flood they would wait for all).
    assert flood_done_meanwhile < len(flood) // 4, (
        flood_done_when_late_arrived,
        flood_done_meanwhile,
    )
    assert_invariants(flood + late)


def test_weights_share_the_dispatches_while_both_queues_wait(pool, queue_settings):
    Queue.objects.create(name=FLOOD, weight=3)
    Queue.objects.create(name=LATE, weight=1)
    heavy, light = submit(FLOOD, 600, sleep_ms=100), submit(LATE, 160, sleep_ms=100)

    wait_completed(heavy + light)

    def dispatch_times(jobs) -> list:
        rows = JobExecution.objects.filter(job_id__in=jobs)
        return sorted(rows.values_list("dispatched_at", flat=True))

    heavy_times, light_times = dispatch_times(heavy), dispatch_times(light)
    # While both wait: from the light queue's first dispatch (the heavy one had the pool to
    # itself before) to its last (the heavy queue's work outlasts it).
    first, last = light_times[0], light_times[-1]
    assert heavy_times[-1] > last, "the heavy queue still waited when the light one ran out"
    heavy_share = sum(1 for at in heavy_times if first <= at <= last)
    ratio = heavy_share / len(light_times)
    assert 2.7 <= ratio <= 3.3, (heavy_share, len(light_times))
    assert_invariants(heavy + light)


def pid(worker_id: str) -> int:
    return int(worker_id.split(":")[1])


def test_an_executor_joining_the_pool_mid_flood_routes_nothing_wrongly(stack, pool, queue_settings):
    pool_jobs = submit(MID, 300, sleep_ms=50)
    default_jobs = submit("default", 150, sleep_ms=50)
    wait_for(
        lambda: completed_count(pool_jobs) >= 20, timeout=60, message="the flood to be under way"
    )
    joined = start_member(stack, "executor-joined")  # the run-job partitions move
    try:
        pool_jobs += submit(MID, 150, sleep_ms=50)  # work for the pool as it is now
        wait_completed(pool_jobs + default_jobs)

        ran = dict(
            ExecutionAttempt.objects.filter(job_id__in=pool_jobs + default_jobs).values_list(
                "job_id", "worker_id"
            )
        )
        pool_pids = {member.pid for member in [*pool, joined]}
        assert {pid(ran[job_id]) for job_id in pool_jobs} <= pool_pids
        assert not {pid(ran[job_id]) for job_id in default_jobs} & pool_pids
        assert joined.pid in {pid(ran[job_id]) for job_id in pool_jobs}, "it took work"
        assert_invariants(pool_jobs + default_jobs)
    finally:
        joined.stop()
        stack.executors.remove(joined)
