"""Two dispatchers on two database connections race over the same 500 due jobs: SKIP LOCKED
hands each job to exactly one of them, and every job runs exactly once."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.dispatch import celery_publisher
from jobweaver.scheduler.models import JobExecution
from tests.integration.helpers import dispatch_until_done
from tests.stack import wait_for

pytestmark = [pytest.mark.integration]


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
