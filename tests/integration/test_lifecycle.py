"""A job's life end to end: HTTP submit → dispatch → Kafka → executor → outcome, on the real
PostgreSQL, the real Kafka broker and real worker processes (fixture `stack`)."""

from __future__ import annotations

import itertools
import json
import uuid

import pytest
from confluent_kafka import Consumer
from django.conf import settings

from jobweaver.core.kafka import JOB_DEAD_LETTER, common_config, topic_name
from tests.integration.helpers import (
    attempts_of,
    submit,
    token_client,
    wait_for_status,
)
from tests.stack import wait_for

pytestmark = [pytest.mark.integration]

SEED_EXAMPLE = [
    {"action": "LOG", "message": "Starting simulation"},
    {"action": "SLEEP", "durationMs": 2000},
    {"action": "COMPUTE", "iterations": 100000},
    {"action": "LOG", "message": "Simulation finished"},
]


def read_dead_letters(job_id: str, *, timeout: float = 20) -> list[dict]:
    """Read `job-dead-letter` from the beginning with a real consumer; the job's events."""
    consumer = Consumer(
        {
            **common_config(),
            "group.id": f"test-dlq-reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic_name(JOB_DEAD_LETTER)])
    found: list[dict] = []
    try:

        def poll_until_found():
            message = consumer.poll(0.2)
            if message is not None and message.error() is None and message.key() == job_id.encode():
                headers = dict(message.headers() or [])
                found.append({**json.loads(message.value()), "_headers": headers})
            return found

        wait_for(poll_until_found, timeout=timeout, interval=0, message="dead-letter event")
    finally:
        consumer.close()
    return found


def test_seed_example_job_completes_over_http(stack, live_db):
    client = token_client()
    job_id = submit(client, SEED_EXAMPLE)

    wait_for_status(job_id, "COMPLETED", timeout=30)

    detail = client.get(f"/api/jobs/{job_id}").json()
    assert detail["status"] == "COMPLETED"
    assert detail["progress"] == {"stepsCompleted": 4, "totalSteps": 4}
    assert [a["outcome"] for a in detail["attempts"]] == ["SUCCESS"]
    assert detail["attempts"][0]["stepsCompleted"] == 4
    attempt = attempts_of(job_id)[0]
    assert (attempt.finished_at - attempt.started_at).total_seconds() >= 2.0
    assert attempt.log_lines == ["Starting simulation", "Simulation finished"]


def test_failing_job_retries_with_backoff_then_dead_letters(stack, live_db):
    client = token_client()
    job_id = submit(client, [{"action": "FAIL", "message": "boom"}], maxRetryCount=2)

    wait_for_status(job_id, "FAILED", timeout=30)

    attempts = attempts_of(job_id)
    assert [a.outcome for a in attempts] == ["FAILURE"] * 3
    assert [a.attempt for a in attempts] == [1, 2, 3]
    base = settings.JOBWEAVER_BACKOFF_BASE_SECONDS
    tick = settings.JOBWEAVER_DISPATCH_INTERVAL_SECONDS
    for failure_number, (failed, retried) in enumerate(itertools.pairwise(attempts), start=1):
        gap = (retried.started_at - failed.finished_at).total_seconds()
        delay = base * 2**failure_number
        assert gap >= delay, f"retry {failure_number} came {gap:.3f} s after, before {delay} s"
        # Upper bound: full jitter, one dispatch tick and generous slack for a loaded machine.
        assert gap <= delay * (1 + settings.JOBWEAVER_BACKOFF_JITTER) + tick + 2.0

    detail = client.get(f"/api/jobs/{job_id}").json()
    assert detail["retryCount"] == 2
    assert detail["lastError"] == "boom"

    [event] = read_dead_letters(job_id)
    assert event["jobId"] == job_id
    assert event["finalRetryCount"] == 2
    assert event["attempts"] == 3
    assert "boom" in event["reason"]
    assert event["traceId"] == detail["traceId"]
    assert event["_headers"]["traceId"] == detail["traceId"].encode()
    assert event["_headers"]["eventId"]


def test_flaky_job_completes_on_the_second_attempt(stack, live_db):
    client = token_client()
    job_id = submit(client, [{"action": "FLAKY", "failTimes": 1}], maxRetryCount=3)

    wait_for_status(job_id, "COMPLETED", timeout=30)

    assert [(a.attempt, a.outcome) for a in attempts_of(job_id)] == [
        (1, "FAILURE"),
        (2, "SUCCESS"),
    ]


def test_non_retryable_failure_dead_letters_at_once(stack, live_db):
    client = token_client()
    job_id = submit(
        client, [{"action": "FAIL", "message": "fatal", "retryable": False}], maxRetryCount=5
    )

    wait_for_status(job_id, "FAILED", timeout=30)

    assert [a.outcome for a in attempts_of(job_id)] == ["FAILURE"]
    [event] = read_dead_letters(job_id)
    assert event["finalRetryCount"] == 0
    assert "non-retryable" in event["reason"]


def test_retry_of_a_failed_job_over_the_api_runs_it_again(stack, live_db):
    client = token_client()
    job_id = submit(client, [{"action": "FLAKY", "failTimes": 1}], maxRetryCount=0)
    wait_for_status(job_id, "FAILED", timeout=30)
    assert client.post(f"/api/jobs/{job_id}/retry").status_code == 200

    wait_for_status(job_id, "COMPLETED", timeout=30)

    detail = client.get(f"/api/jobs/{job_id}").json()
    assert [(a["attempt"], a["outcome"]) for a in detail["attempts"]] == [
        (1, "FAILURE"),
        (2, "SUCCESS"),
    ]
    assert detail["retryCount"] == 0
    # A completed job cannot be retried.
    response = client.post(f"/api/jobs/{job_id}/retry")
    assert response.status_code == 409
    assert response.json()["errorCode"] == "API.INVALID_STATE_TRANSITION"


def test_retry_gives_a_fresh_retry_budget(stack, live_db):
    client = token_client()
    job_id = submit(client, [{"action": "FAIL", "message": "boom"}], maxRetryCount=1)
    wait_for_status(job_id, "FAILED", timeout=30)
    assert len(attempts_of(job_id)) == 2

    assert client.post(f"/api/jobs/{job_id}/retry").status_code == 200
    wait_for(lambda: len(attempts_of(job_id)) == 4, timeout=30, message="two more attempts")
    wait_for_status(job_id, "FAILED", timeout=30)

    assert [a.attempt for a in attempts_of(job_id)] == [1, 2, 3, 4]
