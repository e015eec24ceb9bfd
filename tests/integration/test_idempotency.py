"""Idempotency keys on POST /api/jobs (the Stripe model) under real concurrency: 50 requests
with one key race on 50 database connections and create exactly one job."""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter

import pytest
from django.db import connection
from rest_framework.test import APIClient

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user, token_for
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.models import Job
from jobweaver.outbox.models import OutboxEvent
from tests.integration.helpers import assert_invariants, wait_for_status

pytestmark = [pytest.mark.integration]

REQUESTS = 50


def user_with_token() -> tuple[object, str]:
    user = make_user(None, *SUBMITTER)
    return user, token_for(user)


def post_job(token: str, body: dict, key: str):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client.post(
        "/api/jobs", json.dumps(body), content_type="application/json", HTTP_IDEMPOTENCY_KEY=key
    )


def job_body(message: str) -> dict:
    return {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": message}]}}


def test_fifty_concurrent_posts_with_one_key_create_one_job(stack, live_db):
    user, token = user_with_token()
    key = f"key-{uuid.uuid4().hex}"
    body = job_body("exactly once")
    start = threading.Barrier(REQUESTS)
    responses: list[tuple[int, dict] | None] = [None] * REQUESTS

    def post(index: int) -> None:
        try:
            start.wait()
            response = post_job(token, body, key)
            responses[index] = (response.status_code, response.json())
        finally:
            connection.close()  # each thread has its own connection

    threads = [threading.Thread(target=post, args=(index,)) for index in range(REQUESTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert None not in responses
    assert Counter(status for status, _ in responses) == {202: 1, 200: REQUESTS - 1}, responses
    [job_id] = {answer["jobId"] for _, answer in responses}
    assert Job.objects.filter(submitted_by=user).count() == 1
    assert OutboxEvent.objects.filter(topic="job-created", key=job_id).count() == 1
    wait_for_status(job_id, "COMPLETED", timeout=30)
    assert ExecutionAttempt.objects.filter(job_id=job_id).count() == 1

    # A replay returns the original job; the same key with another body is refused.
    replay = post_job(token, body, key)
    assert (replay.status_code, replay.json()["jobId"]) == (200, job_id)
    assert replay.json()["status"] == "COMPLETED"
    conflict = post_job(token, job_body("something else"), key)
    assert conflict.status_code == 409
    assert conflict.json()["errorCode"] == "API.IDEMPOTENCY_CONFLICT"
    assert conflict.json()["jobId"] == job_id
    assert Job.objects.filter(submitted_by=user).count() == 1

    # The key belongs to its user: another user with the same key gets a job of their own.
    other_user, other_token = user_with_token()
    other = post_job(other_token, body, key)
    assert other.status_code == 202
    assert other.json()["jobId"] != job_id
    assert Job.objects.get(submitted_by=other_user).id == uuid.UUID(other.json()["jobId"])
    wait_for_status(other.json()["jobId"], "COMPLETED", timeout=30)
    assert_invariants([job_id, other.json()["jobId"]])
