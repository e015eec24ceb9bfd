"""Four dispatchers on four database connections race over the same 2,000 due jobs: SKIP LOCKED
hands each job to exactly one of them, each job's one attempt gets exactly one message, and
every job runs exactly once on the real executors."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.dispatch import celery_publisher
from jobweaver.scheduler.models import JobExecution
from tests.integration.helpers import assert_invariants, dispatch_until_done, live_executors
from tests.stack import stop_together, wait_for

pytestmark = [pytest.mark.integration]


JOBS = 2000
DISPATCHERS = ("a", "b", "c", "d")


@pytest.fixture
def four_executors(stack):
    """Four executors consume the race's messages (each job must still run exactly once); the
    ones started here stop afterwards."""
    started = live_executors(stack, 4)
    yield
    stop_together(started)
    for worker in started:
        stack.executors.remove(worker)


def test_four_racing_dispatchers_dispatch_each_job_once_per_attempt(stack, live_db, four_executors):
    # Due only for the racing dispatchers (which look an hour ahead): the live beat tick of
    # the stack must not take part, so the counts below belong to the four racers alone.
    run_at = (timezone.now() + timedelta(minutes=30)).isoformat()
    spec = parse_job_request(
        {
            "jobType": "SIMULATION",
            "runAt": run_at,
            "payload": {"steps": [{"action": "LOG", "message": "raced by four"}]},
        }
    )
    began = time.monotonic()
    job_ids = {job_submit(spec=spec).job.id for _ in range(JOBS)}
    submit_seconds = time.monotonic() - began
    assert JobExecution.objects.filter(job_id__in=job_ids, status="PENDING").count() == JOBS

    start = threading.Barrier(len(DISPATCHERS))
    claimed: dict[str, list] = {}
    published: dict[str, list] = {name: [] for name in DISPATCHERS}

    def dispatcher(name: str) -> None:
        def publish(messages):
            published[name].extend(messages)
            celery_publisher(messages)

        try:
            start.wait()
            claimed[name] = dispatch_until_done(job_ids, batch_size=25, publish=publish)
        finally:
            connection.close()  # each thread has its own connection

    started = time.monotonic()
    threads = [threading.Thread(target=dispatcher, args=(name,)) for name in DISPATCHERS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    dispatch_seconds = time.monotonic() - started

    assert set(claimed) == set(DISPATCHERS), "a dispatcher thread failed"
    assert sum(len(ids) for ids in claimed.values()) == JOBS
    for name, ids in claimed.items():
        others = set().union(*(set(claimed[other]) for other in DISPATCHERS if other != name))
        assert not set(ids) & others, f"dispatcher {name} claimed a job another one claimed"
    assert set().union(*map(set, claimed.values())) == job_ids
    assert all(claimed.values()), {name: len(ids) for name, ids in claimed.items()}
    messages = [message for sent in published.values() for message in sent]
    assert Counter(message.job_id for message in messages) == {str(job_id): 1 for job_id in job_ids}
    assert len({message.event_id for message in messages}) == JOBS

    wait_for(
        lambda: JobExecution.objects.filter(job_id__in=job_ids, status="COMPLETED").count() == JOBS,
        timeout=300,
        interval=0.5,
        message="all raced jobs to complete",
    )
    run_seconds = time.monotonic() - started
    shares = {name: len(ids) for name, ids in claimed.items()}
    print(
        f"\n4 dispatchers: {JOBS} jobs submitted in {submit_seconds:.1f} s, claimed in "
        f"{dispatch_seconds:.1f} s {shares}, all completed {run_seconds:.1f} s after the start"
    )
    attempts = ExecutionAttempt.objects.filter(job_id__in=job_ids)
    assert attempts.count() == JOBS
    assert set(attempts.values_list("outcome", "attempt").distinct()) == {("SUCCESS", 1)}
    assert {str(event_id) for event_id in attempts.values_list("event_id", flat=True)} == {
        message.event_id for message in messages
    }
    assert_invariants(job_ids)
