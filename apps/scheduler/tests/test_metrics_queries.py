"""The cluster gauges' queries (apps/scheduler/metrics.py) stay bounded by their indexes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.utils import timezone

from jobweaver.jobs.services import job_submit_batch
from jobweaver.jobs.validation import parse_job_request

pytestmark = pytest.mark.django_db


def test_the_oldest_due_gauge_reads_up_to_the_first_due_job_not_every_delayed_one():
    """`jobweaver_oldest_due_job_age_seconds`, read on every scrape: the clock bounds its index
    scan, so a queue of delayed jobs is not read through. Index scans are forced: what the test
    reads is whether the clock bounds the scan or filters it."""
    from jobweaver.scheduler.metrics import OLDEST_DUE_SQL, oldest_due_seconds

    # Delayed jobs only, with statistics: the planner's choice among the PENDING rows' indexes
    # is then the one a real queue gets (on an empty table any of them looks as good).
    later = (timezone.now() + timedelta(days=1)).isoformat()
    spec = parse_job_request(
        {
            "jobType": "SIMULATION",
            "payload": {"steps": [{"action": "LOG", "message": "x"}]},
            "runAt": later,
        }
    )
    job_submit_batch(specs=[spec] * 500)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobweaver_scheduler_jobexecution")
    assert oldest_due_seconds() == 0.0  # nothing due

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {OLDEST_DUE_SQL}")
        plan = [line for (line,) in cursor.fetchall()]

    assert any("Index Cond" in line and "next_run_at" in line for line in plan), plan
    assert not any("Filter" in line and "next_run_at" in line for line in plan), plan


def test_the_per_queue_gauges_count_each_queues_due_work_and_its_oldest_age():
    """What a pool's autoscaler reads (the Helm chart's KEDA triggers): due work per queue and
    the age of its oldest, delayed work left out."""
    from jobweaver.scheduler.metrics import database_gauges

    def submit(queue: str, count: int, **fields) -> None:
        spec = parse_job_request(
            {
                "jobType": "SIMULATION",
                "payload": {"steps": [{"action": "LOG", "message": "x"}]},
                "queueName": queue,
                **fields,
            }
        )
        job_submit_batch(specs=[spec] * count)

    submit("reports", 3)
    submit("bulk", 2)
    submit("bulk", 4, runAt=(timezone.now() + timedelta(days=1)).isoformat())
    # The PostgreSQL gauges only: a DB test never talks to Kafka (a lag reading would meet
    # the session's topics before the stack sets them up).
    samples = {
        (sample.name, sample.labels.get("queue")): sample.value
        for family in database_gauges()
        for sample in family.samples
    }

    def value(name: str, queue: str):
        return samples.get((name, queue))

    assert value("jobweaver_queue_waiting", "reports") == 3
    assert value("jobweaver_queue_waiting", "bulk") == 2
    assert value("jobweaver_queue_waiting", "default") is None
    assert 0 <= value("jobweaver_queue_oldest_due_age_seconds", "bulk") < 60
