"""Two dispatchers on two database connections race over the same 500 due jobs: SKIP LOCKED
hands each job to exactly one of them, and every job runs exactly once."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.executor.models import ExecutionAttempt
from apps.jobs.services import job_submit
from apps.jobs.validation import parse_job_request
from apps.scheduler.dispatch import celery_publisher, dispatch_due_jobs
from apps.scheduler.models import JobExecution
from tests.stack import wait_for

pytestmark = [pytest.mark.integration]


def dispatch_until_done(job_ids, *, batch_size: int, publish) -> list:
    """Dispatch (as if an hour later) until none of the jobs waits: flow control lets each
    call claim at most the executors' free credits, which free up as jobs complete."""
    claimed: list = []
    deadline = time.monotonic() + 240
    while JobExecution.objects.filter(job_id__in=job_ids, status="PENDING").exists():
        assert time.monotonic() < deadline, "the racers did not dispatch every job in time"
        batch = dispatch_due_jobs(
            now=timezone.now() + timedelta(hours=1),
            batch_size=batch_size,
            job_ids=job_ids,
            publish=publish,
        )
        claimed.extend(batch)
        if not batch:
            time.sleep(0.01)  # no free credit right now: completions free some
    return claimed


JOBS = 500


def test_two_racing_dispatchers_dispatch_each_job_once(stack, live_db):
    # Due only for the racing dispatchers (which look an hour ahead): the live beat tick of
    # the stack must not take part, so the counts below belong to the two racers alone.
    run_at = (timezone.now() + timedelta(minutes=30)).isoformat()
    spec = parse_job_request(
        {
            "jobType": "SIMULATION",
            "runAt": run_at,
            "payload": {"steps": [{"action": "LOG", "message": "raced"}]},
        }
    )
    job_ids = {job_submit(spec=spec).job.id for _ in range(JOBS)}
    assert JobExecution.objects.filter(job_id__in=job_ids, status="PENDING").count() == JOBS

    start = threading.Barrier(2)
    results: dict[str, list] = {}
    published: dict[str, list] = {"a": [], "b": []}

    def dispatcher(name: str) -> None:
        def publish(messages):
            published[name].extend(message.job_id for message in messages)
            celery_publisher(messages)

        try:
            start.wait()
            results[name] = dispatch_until_done(job_ids, batch_size=20, publish=publish)
        finally:
            connection.close()  # each thread has its own connection

    threads = [threading.Thread(target=dispatcher, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    a, b = set(results["a"]), set(results["b"])
    assert len(results["a"]) + len(results["b"]) == JOBS
    assert not a & b, "a job was claimed by both dispatchers"
    assert a | b == job_ids
    assert a and b, "both dispatchers should have taken part in the race"
    assert sorted(published["a"] + published["b"]) == sorted(str(i) for i in job_ids)

    wait_for(
        lambda: JobExecution.objects.filter(job_id__in=job_ids, status="COMPLETED").count() == JOBS,
        timeout=240,
        interval=0.5,
        message="all raced jobs to complete",
    )
    attempts = ExecutionAttempt.objects.filter(job_id__in=job_ids)
    assert attempts.count() == JOBS
    assert attempts.filter(outcome="SUCCESS").count() == JOBS
