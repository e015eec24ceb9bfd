"""One job's trace id, followed through the web's log lines (JSON), the scheduler worker's and
the executor worker's log lines (plain), and the headers of its Kafka records: the run_job
record the scheduler sent and the domain events of its outbox."""

from __future__ import annotations

import io
import json
import logging
import re
import uuid
from datetime import timedelta

import pytest
from confluent_kafka import Consumer
from django.utils import timezone

from jobweaver.core.kafka import JOB_COMPLETED, RUN_JOB, common_config, topic_name
from jobweaver.core.logcontext import ContextFilter, JsonFormatter
from tests.integration.helpers import token_client, wait_for_status
from tests.stack import wait_for

pytestmark = [pytest.mark.integration]


@pytest.fixture
def web_log():
    """The web's log lines, as its console handler writes them with JOBWEAVER_LOG_FORMAT=json
    (the web runs in this process: the test client)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    root.removeHandler(handler)


def records_of(topic: str, job_id: str, count: int, *, timeout: float = 30) -> list:
    """The first `count` records of `topic` keyed by the job, read from the beginning."""
    consumer = Consumer(
        {
            **common_config(),
            "group.id": f"test-trace-reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    found: list = []

    def enough():
        record = consumer.poll(0.2)
        if record is not None and record.error() is None and record.key() == job_id.encode():
            found.append(record)
        return len(found) >= count

    try:
        wait_for(enough, timeout=timeout, interval=0, message=f"{count} record(s) on {topic}")
    finally:
        consumer.close()
    return found


def lines_with(worker, needle: str) -> list[str]:
    return [line for line in worker.log_text().splitlines() if needle in line]


def test_one_trace_id_through_web_scheduler_executor_and_kafka_headers(stack, live_db, web_log):
    trace_id = f"trace-{uuid.uuid4().hex[:12]}"
    # Due a moment from now: the web's fast path finds it not due yet, so the scheduler worker
    # is the one that dispatches it.
    run_at = (timezone.now() + timedelta(seconds=3)).isoformat()
    body = {
        "jobType": "SIMULATION",
        "payload": {"steps": [{"action": "LOG", "message": "traced step"}]},
        "runAt": run_at,
    }
    response = token_client().post(
        "/api/jobs", json.dumps(body), content_type="application/json", HTTP_X_TRACE_ID=trace_id
    )
    assert response.status_code == 202, response.content
    job_id = response.json()["jobId"]
    assert response.json()["traceId"] == trace_id == response["X-Trace-Id"]
    wait_for_status(job_id, "COMPLETED")

    # Web: the submission's line, in JSON, with the service and the job's trace.
    submitted = [line for line in web_log() if line["message"].startswith(f"job {job_id} ")]
    assert submitted, web_log()
    assert all(line["traceId"] == trace_id and line["service"] == "web" for line in submitted)
    assert submitted[0]["jobId"] == job_id

    # Scheduler worker: its dispatch of the job, with the trace in the line's context.
    context = f"trace={trace_id} job={job_id}"
    dispatched = wait_for(
        lambda: lines_with(stack.scheduler, f"job {job_id} dispatched"),
        timeout=10,
        message="the scheduler's dispatch line",
    )
    assert all(f"[scheduler {context} attempt=-]" in line for line in dispatched), dispatched

    # Executor worker: the LOG step and the outcome of attempt 1, each with trace, job and
    # attempt.
    executor_lines = [
        line for worker in stack.executors for line in lines_with(worker, f"[executor {context}")
    ]
    assert any(line.endswith("attempt=1] traced step") for line in executor_lines)
    assert any(
        re.search(rf"attempt=1\] job {job_id} attempt 1: SUCCESS", line) for line in executor_lines
    ), executor_lines

    # Kafka: the run_job record and the JobCompleted event carry the trace in their headers.
    [run_job] = records_of(topic_name(RUN_JOB), job_id, 1)
    headers = dict(run_job.headers())
    assert headers["traceId"] == trace_id.encode()
    assert headers["jobId"] == job_id.encode()
    assert json.loads(run_job.value())["headers"]["trace_id"] == trace_id
    [completed] = records_of(topic_name(JOB_COMPLETED), job_id, 1)
    assert dict(completed.headers())["traceId"] == trace_id.encode()
    assert json.loads(completed.value())["traceId"] == trace_id
