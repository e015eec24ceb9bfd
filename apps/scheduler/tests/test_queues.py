"""Queues that route (ARCHITECTURE §15), without workers: the dispatcher spends an executor's
credits only on the queues it serves, work nobody serves waits, and a delivery that reached an
executor of another pool goes back in line. With real executors: tests/integration/test_queues.py.
"""

from __future__ import annotations

import pytest

from jobweaver.accounts.tests.helpers import make_user
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.executor.services import attempt_start
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.models import ExecutionStatus, JobExecution, PauseScope, Queue
from jobweaver.scheduler.selectors import queues_without_executor, waiting_queues
from jobweaver.scheduler.services import queue_pause
from jobweaver.scheduler.tests.factories import WORKER, live_executor, submitted_job

pytestmark = pytest.mark.django_db

DEFAULT_POOL, GPU_POOL = "host-a:1", "host-b:2"


def test_each_job_goes_to_an_executor_that_serves_its_queue(monkeypatch):
    monkeypatch.setattr("jobweaver.scheduler.dispatch.dispatch_job_now", lambda job_id: None)
    live_executor(DEFAULT_POOL, slots=10, queues=["default"])
    live_executor(GPU_POOL, slots=10, partitions=(1,), queues=["gpu"])
    jobs = [submitted_job(queueName=queue) for queue in ["default", "gpu"] * 6]
    sent: list = []

    dispatched = dispatch_due_jobs(publish=sent.extend)

    assert set(dispatched) == {job.id for job in jobs}
    worker_of = dict(JobExecution.objects.values_list("job_id", "worker_id"))
    for job in jobs:
        assert worker_of[job.id] == (GPU_POOL if job.queue_name == "gpu" else DEFAULT_POOL)
    partition_of = {job_id: partition for job_id, _, partition in sent}
    assert {partition_of[str(job.id)] for job in jobs if job.queue_name == "gpu"} == {1}


def test_work_of_a_queue_nobody_serves_waits_unattempted(monkeypatch):
    live_executor(DEFAULT_POOL, slots=10, queues=["default"])
    waiting = [submitted_job(queueName="reports") for _ in range(3)]
    served = submitted_job()

    assert dispatch_due_jobs(publish=lambda deliveries: None) == [served.id]
    statuses = JobExecution.objects.filter(job__in=waiting).values_list("status", flat=True)
    assert set(statuses) == {ExecutionStatus.PENDING}
    assert not ExecutionAttempt.objects.filter(job__in=waiting).exists()

    live_executor(GPU_POOL, slots=10, partitions=(1,), queues=["reports"])
    assert set(dispatch_due_jobs(publish=lambda deliveries: None)) == {j.id for j in waiting}


def test_an_executor_serving_several_queues_takes_each_queues_best_work():
    live_executor(DEFAULT_POOL, slots=1, queues=["default", "gpu"])  # prefetch 2: two credits
    submitted_job(queueName="default", priority=1)
    urgent = [submitted_job(queueName=q, priority=9) for q in ("gpu", "default")]

    assert set(dispatch_due_jobs(publish=lambda deliveries: None)) == {j.id for j in urgent}


# --- a queue's cap and weight (apps/engine/claim/queues.py) ------------------------------------


def _dispatched_per_queue() -> dict[str, int]:
    counts: dict[str, int] = {}
    for queue in JobExecution.objects.filter(status=ExecutionStatus.DISPATCHED).values_list(
        "queue_name", flat=True
    ):
        counts[queue] = counts.get(queue, 0) + 1
    return counts


def _flood(queue: str, count: int, **fields) -> list:
    return [submitted_job(queueName=queue, **fields) for _ in range(count)]


def test_a_queue_never_has_more_than_its_max_running_in_flight_across_pools():
    Queue.objects.create(name="reports", max_running=3)
    live_executor(DEFAULT_POOL, slots=10, queues=["reports"])
    live_executor(GPU_POOL, slots=10, partitions=(1,), queues=["reports", "default"])
    _flood("reports", 10)
    others = _flood("default", 4)

    dispatch_due_jobs(publish=lambda deliveries: None)
    assert _dispatched_per_queue() == {"reports": 3, "default": 4}

    # Nothing more while three are in flight; one finishing (here: handed back) frees one.
    assert dispatch_due_jobs(publish=lambda deliveries: None) == []
    done = JobExecution.objects.filter(queue_name="reports", status="DISPATCHED").first()
    JobExecution.objects.filter(pk=done.pk).update(status=ExecutionStatus.COMPLETED)
    assert len(dispatch_due_jobs(publish=lambda deliveries: None)) == 1
    assert _dispatched_per_queue()["reports"] == 3
    assert {o.id for o in others} <= set(
        JobExecution.objects.filter(status="DISPATCHED").values_list("job_id", flat=True)
    )


def test_the_fast_path_after_a_submit_keeps_the_cap_too():
    Queue.objects.create(name="reports", max_running=1)
    live_executor(DEFAULT_POOL, slots=10, queues=["reports"])
    first, second = _flood("reports", 2)

    assert dispatch_due_jobs(job_ids=[first.id], publish=lambda d: None) == [first.id]
    assert dispatch_due_jobs(job_ids=[second.id], publish=lambda d: None) == []


def test_a_pool_shares_its_credits_between_waiting_queues_by_weight():
    Queue.objects.create(name="a", weight=3)
    live_executor(DEFAULT_POOL, slots=8, queues=["a", "b"])  # prefetch 2: 16 credits
    _flood("a", 30)
    _flood("b", 30)

    dispatch_due_jobs(publish=lambda deliveries: None)

    assert _dispatched_per_queue() == {"a": 12, "b": 4}


def test_a_queue_over_its_weighted_share_leaves_the_next_slot_to_the_queue_under_it(settings):
    # In steady state a slot frees at a time: it must go by the work in flight before it, or
    # the heavier queue keeps about two jobs more than its share (3:1 became 3.4:1 in a pool).
    Queue.objects.create(name="a", weight=3)
    settings.JOBWEAVER_DISPATCH_PREFETCH = 1  # a credit per slot
    live_executor(DEFAULT_POOL, slots=18, queues=["a", "b"])
    _flood("a", 14)
    dispatch_due_jobs(publish=lambda deliveries: None)
    _flood("b", 4)
    dispatch_due_jobs(publish=lambda deliveries: None)
    _flood("a", 5)
    _flood("b", 5)

    live_executor(DEFAULT_POOL, slots=19, queues=["a", "b"])  # one slot more
    dispatch_due_jobs(publish=lambda deliveries: None)

    assert _dispatched_per_queue() == {"a": 14, "b": 5}  # a has 14 > 3 x 4 already


def test_a_flooded_queue_gives_way_to_a_queue_whose_work_arrives_later():
    live_executor(DEFAULT_POOL, slots=4, queues=["a", "b"])  # 8 credits
    _flood("a", 30)
    dispatch_due_jobs(publish=lambda deliveries: None)
    assert _dispatched_per_queue() == {"a": 8}  # nothing else waits: a takes every credit

    _flood("b", 10, priority=1)  # a lower priority does not keep it behind a's flood
    for execution in JobExecution.objects.filter(status="DISPATCHED")[:4]:
        JobExecution.objects.filter(pk=execution.pk).update(status=ExecutionStatus.COMPLETED)
    dispatch_due_jobs(publish=lambda deliveries: None)

    assert _dispatched_per_queue() == {"a": 4, "b": 4}


def test_a_queue_with_nothing_due_leaves_its_share_to_the_others():
    Queue.objects.create(name="a", weight=100)
    live_executor(DEFAULT_POOL, slots=5, queues=["a", "b"])
    _flood("b", 20)

    assert len(dispatch_due_jobs(publish=lambda deliveries: None)) == 10


def test_a_paused_queue_of_a_pool_leaves_the_pool_to_its_other_queues():
    queue_pause(scope=PauseScope.QUEUE, name="a")
    live_executor(DEFAULT_POOL, slots=5, queues=["a", "b"])
    _flood("a", 20)
    _flood("b", 20)

    dispatch_due_jobs(publish=lambda deliveries: None)

    assert _dispatched_per_queue() == {"b": 10}


def test_a_delivery_for_a_queue_this_executor_does_not_serve_goes_back_in_line(
    settings, monkeypatch
):
    redispatched: list = []
    monkeypatch.setattr(
        "jobweaver.executor.services.dispatch_job_now", lambda job_id: redispatched.append(job_id)
    )
    live_executor(DEFAULT_POOL, slots=10, queues=["gpu"])
    job = submitted_job(queueName="gpu")
    sent: list = []
    assert dispatch_due_jobs(job_ids=[job.id], publish=sent.extend) == [job.id]
    [(_, event_id, _)] = sent
    settings.JOBWEAVER_EXECUTOR_QUEUES = ["default"]  # a rebalance gave it to the default pool

    assert attempt_start(job_id=job.id, event_id=event_id, worker_id=WORKER) is None

    execution = JobExecution.objects.get(job=job)
    assert (execution.status, execution.current_event_id) == (ExecutionStatus.PENDING, None)
    assert (execution.redelivery_count, execution.retry_count) == (1, 0)
    assert not ExecutionAttempt.objects.filter(job=job).exists()
    assert redispatched == [job.id]


def test_a_stale_delivery_is_not_handed_back_twice(settings, monkeypatch):
    monkeypatch.setattr("jobweaver.executor.services.dispatch_job_now", lambda job_id: None)
    live_executor(DEFAULT_POOL, slots=10, queues=["gpu"])
    job = submitted_job(queueName="gpu")
    sent: list = []
    dispatch_due_jobs(job_ids=[job.id], publish=sent.extend)
    [(_, event_id, _)] = sent
    settings.JOBWEAVER_EXECUTOR_QUEUES = ["default"]
    attempt_start(job_id=job.id, event_id=event_id, worker_id=WORKER)

    assert attempt_start(job_id=job.id, event_id=event_id, worker_id=WORKER) is None
    assert JobExecution.objects.get(job=job).redelivery_count == 1


def test_a_queue_with_waiting_work_and_no_executor_is_named_where_operators_look(client):
    live_executor(DEFAULT_POOL, slots=10, queues=["default"])
    submitted_job(queueName="reports")
    submitted_job(queueName="reports")
    submitted_job()

    assert waiting_queues() == ["default", "reports"]
    assert queues_without_executor() == ["reports"]
    client.force_login(make_user("readyz-operator", "jobweaver_jobs.view_all_jobs"))
    ready = client.get("/readyz").json()
    assert ready["queuesWithoutExecutor"] == ["reports"]
    assert "queue 'reports' has waiting work and no live executor serving it" in ready["warnings"]

    live_executor(GPU_POOL, slots=10, partitions=(1,), queues=["reports"])
    assert queues_without_executor() == []
