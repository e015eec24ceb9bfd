"""Helpers shared by integration tests: an authenticated API client, job state, waiting."""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from django.utils import timezone
from rest_framework.test import APIClient

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user, token_for
from jobweaver.core.kafka import common_config, topic_name
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.models import JobExecution
from tests.stack import wait_for

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED"}


def token_client(*, staff: bool = False) -> APIClient:
    """An API client authenticated the way real clients are: `Authorization: Token <key>`, as
    a new user who may submit, retry and cancel their own jobs."""
    user = make_user(None, *SUBMITTER, is_staff=staff)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    return client


def submit(client: APIClient, steps: list[dict], **fields) -> str:
    body = {"jobType": "SIMULATION", "payload": {"steps": steps}, **fields}
    response = client.post("/api/jobs", json.dumps(body), content_type="application/json")
    assert response.status_code == 202, response.content
    return response.json()["jobId"]


def status_of(job_id) -> str:
    return JobExecution.objects.get(job_id=job_id).status


def wait_for_status(job_id, *statuses: str, timeout: float = 30) -> str:
    return wait_for(
        lambda: status_of(job_id) in statuses and status_of(job_id),
        timeout=timeout,
        message=f"job {job_id} to reach {'/'.join(statuses)} (now {status_of(job_id)})",
    )


def worker_pid(attempt: ExecutionAttempt) -> int:
    """The pid of the executor process that ran an attempt (worker_id is host:pid:thread)."""
    return int(attempt.worker_id.split(":")[1])


def attempts_of(job_id) -> list[ExecutionAttempt]:
    return list(ExecutionAttempt.objects.filter(job_id=job_id).order_by("attempt"))


def running_attempt(job_id, *, steps_completed: int = 1, timeout: float = 30) -> ExecutionAttempt:
    """Wait until the job's attempt is RUNNING with `steps_completed` steps done, i.e. inside
    the step after them."""
    return wait_for(
        lambda: ExecutionAttempt.objects.filter(
            job_id=job_id, outcome="RUNNING", steps_completed=steps_completed
        ).first(),
        timeout=timeout,
        message=f"job {job_id} to run past step {steps_completed}",
    )


def assert_invariants(job_ids) -> None:
    """`manage.py check_invariants`, scoped to these jobs: no violation."""
    from jobweaver.scheduler.invariants import check_invariants

    violations = check_invariants(job_ids=list(job_ids))
    assert not violations, "\n".join(str(violation) for violation in violations)


def read_event(topic: str, key: str, *, timeout: float = 60) -> dict:
    """The first event with `key` on domain-event topic `topic` (its base name), as published
    on Kafka, read from the topic's beginning."""
    name = topic_name(topic)
    consumer = Consumer(
        {**common_config(), "group.id": f"test-{uuid.uuid4().hex}", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(name, timeout=10).topics[name].partitions
        consumer.assign([TopicPartition(name, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(message.error())
            if message.key() == key.encode():
                return json.loads(message.value())
        raise AssertionError(f"no event with key {key} on {name} in {timeout} s")
    finally:
        consumer.close()


def live_executors(stack, count: int) -> list:
    """Forget executors that died, then start new ones until `count` are alive; returns the
    ones started."""
    stack.executors[:] = [worker for worker in stack.executors if worker.alive()]
    started = []
    while len(stack.executors) < count:
        # A fresh name: a reused one would append to an old log that already says "ready".
        started.append(stack.start_executor(f"executor-{uuid.uuid4().hex[:6]}"))
    return started


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
