"""Queues that route (ARCHITECTURE §15), without workers: the dispatcher spends an executor's
credits only on the queues it serves, work nobody serves waits, and a delivery that reached an
executor of another pool goes back in line. With real executors: tests/integration/test_queues.py.
"""

from __future__ import annotations

import pytest

from jobweaver.executor.models import ExecutionAttempt
from jobweaver.executor.services import attempt_start
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.models import ExecutionStatus, JobExecution
from jobweaver.scheduler.selectors import queues_without_executor, waiting_queues
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


def test_an_executor_serving_several_queues_takes_the_best_work_of_all_of_them():
    live_executor(DEFAULT_POOL, slots=1, queues=["default", "gpu"])  # prefetch 2: two credits
    submitted_job(queueName="default", priority=1)
    urgent = [submitted_job(queueName=q, priority=9) for q in ("gpu", "default")]

    assert set(dispatch_due_jobs(publish=lambda deliveries: None)) == {j.id for j in urgent}


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
    ready = client.get("/readyz").json()
    assert ready["queuesWithoutExecutor"] == ["reports"]
    assert "queue 'reports' has waiting work and no live executor serving it" in ready["warnings"]

    live_executor(GPU_POOL, slots=10, partitions=(1,), queues=["reports"])
    assert queues_without_executor() == []
