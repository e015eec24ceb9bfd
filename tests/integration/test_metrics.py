"""Prometheus metrics, scraped as Prometheus would: the web's /metrics (this process's counters
and the cluster gauges) and each worker process's own port, before and after a few jobs on the
real stack; consumer lag rises while the executors are frozen (SIGSTOP) and falls after SIGCONT.
Every endpoint takes the bearer token (JOBWEAVER_METRICS_TOKEN, set by the test settings)."""

from __future__ import annotations

import json
import signal
import urllib.request

import pytest
from django.conf import settings
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from jobweaver.core.kafka import RUN_JOB, topic_name
from tests.integration.helpers import submit, token_client, wait_for_status
from tests.stack import wait_for

pytestmark = [pytest.mark.integration]


class Scrape:
    def __init__(self, text: str):
        self.samples = [
            sample for family in text_string_to_metric_families(text) for sample in family.samples
        ]

    def value(self, metric: str, /, **labels: str) -> float:
        """Sum of the samples called `metric` whose labels include `labels` (0 when none)."""
        return sum(
            sample.value
            for sample in self.samples
            if sample.name == metric and all(sample.labels.get(k) == v for k, v in labels.items())
        )


def authorization() -> dict[str, str]:
    return {"Authorization": f"Bearer {settings.JOBWEAVER_METRICS_TOKEN}"}


def scrape_web() -> Scrape:
    response = Client().get("/metrics", headers=authorization())
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    return Scrape(response.content.decode())


def scrape_port(port: int) -> Scrape:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=authorization())
    with urllib.request.urlopen(request, timeout=5) as response:
        return Scrape(response.read().decode())


def scrape_workers(workers) -> Scrape:
    """The workers' metrics together, as Prometheus sums them over its targets."""
    merged = Scrape("")
    for worker in workers:
        merged.samples += scrape_port(worker.metrics_port).samples
    return merged


def run_job_lag() -> float:
    return scrape_web().value("jobweaver_kafka_consumer_lag", topic=topic_name(RUN_JOB))


def test_counters_histograms_and_gauges_move_with_jobs(stack, live_db):
    executors = [worker for worker in stack.executors if worker.alive()]
    before_web, before_scheduler = scrape_web(), scrape_port(stack.scheduler.metrics_port)
    before_executors = scrape_workers(executors)

    client = token_client()
    ok = [submit(client, [{"action": "LOG", "message": f"m{i}"}]) for i in range(2)]
    doomed = submit(client, [{"action": "FAIL", "message": "no", "retryable": False}])
    for job_id in ok:
        wait_for_status(job_id, "COMPLETED")
    wait_for_status(doomed, "FAILED")

    web, scheduler = scrape_web(), scrape_port(stack.scheduler.metrics_port)
    after_executors = scrape_workers(executors)

    def moved(after: Scrape, before: Scrape, metric: str, /, **labels) -> float:
        return after.value(metric, **labels) - before.value(metric, **labels)

    # Submitted in the web (this process), exactly these three.
    assert moved(web, before_web, "jobweaver_jobs_submitted_total", job_type="SIMULATION") == 3
    # Dispatched by the web's fast path or the scheduler worker: all three, somewhere.
    dispatched = moved(web, before_web, "jobweaver_jobs_dispatched_total") + moved(
        scheduler, before_scheduler, "jobweaver_jobs_dispatched_total"
    )
    assert dispatched >= 3
    assert (
        moved(web, before_web, "jobweaver_dispatch_wait_seconds_count")
        + moved(scheduler, before_scheduler, "jobweaver_dispatch_wait_seconds_count")
        >= 3
    )
    # Attempts, their outcome and duration, and the dead letter: counted by the executors.
    assert (
        moved(after_executors, before_executors, "jobweaver_attempts_total", outcome="SUCCESS") >= 2
    )
    assert (
        moved(after_executors, before_executors, "jobweaver_attempts_total", outcome="FAILURE") >= 1
    )
    assert moved(after_executors, before_executors, "jobweaver_jobs_dead_lettered_total") >= 1
    assert moved(after_executors, before_executors, "jobweaver_start_wait_seconds_count") >= 3
    assert (
        moved(
            after_executors,
            before_executors,
            "jobweaver_attempt_duration_seconds_count",
            outcome="SUCCESS",
        )
        >= 2
    )
    assert (
        moved(after_executors, before_executors, "jobweaver_transitions_total", name="complete")
        >= 2
    )
    # Cluster gauges, from PostgreSQL at scrape time.
    assert web.value("jobweaver_metrics_source_up", source="postgresql") == 1
    assert web.value("jobweaver_metrics_source_up", source="kafka") == 1
    assert web.value("jobweaver_live_executors") >= 1
    assert web.value("jobweaver_executor_slots") >= 1
    assert web.value("jobweaver_jobs", status="COMPLETED") >= 2
    assert web.value("jobweaver_jobs", status="FAILED") >= 1
    assert "jobweaver_dispatch_credits_free" in {s.name for s in web.samples}
    assert "jobweaver_oldest_due_job_age_seconds" in {s.name for s in web.samples}


def test_consumer_lag_rises_while_executors_are_stopped_and_falls_after(stack, live_db):
    executors = [worker for worker in stack.executors if worker.alive()]
    wait_for(lambda: run_job_lag() == 0, timeout=30, message="no run-job lag to start with")
    redelivered_before = scrape_port(stack.scheduler.metrics_port).value(
        "jobweaver_jobs_redelivered_total"
    )
    client = token_client()
    for worker in executors:
        worker.signal(signal.SIGSTOP)
    try:
        # Submitted at once, while the frozen executors still count as live: flow control
        # sends them a window of deliveries that nobody consumes.
        body = {
            "jobs": [
                {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
                for _ in range(4)
            ]
        }
        response = client.post("/api/jobs/batch", json.dumps(body), content_type="application/json")
        assert response.status_code == 202, response.content
        job_ids = [job["jobId"] for job in response.json()["jobs"]]
        wait_for(lambda: run_job_lag() >= 1, timeout=20, message="run-job lag to rise")
        # Unstarted deliveries come back when their dispatch lease expires: counted.
        wait_for(
            lambda: (
                scrape_port(stack.scheduler.metrics_port).value("jobweaver_jobs_redelivered_total")
                > redelivered_before
            ),
            timeout=30,
            message="the rescue to count redeliveries",
        )
    finally:
        for worker in executors:
            worker.signal(signal.SIGCONT)
    for job_id in job_ids:
        wait_for_status(job_id, "COMPLETED", timeout=60)
    wait_for(lambda: run_job_lag() == 0, timeout=30, message="run-job lag to fall back to 0")
