"""The run_jobs message dispatch builds itself is the message Celery's `send_task` would send
(apps/scheduler/run_job_message.py): same protocol fields, same body, same routing. Both go
through kombu's in-memory transport and are read back as a worker would receive them."""

from __future__ import annotations

import json

import pytest
from celery import Celery
from kombu import Connection

from jobweaver.scheduler import run_job_message

JOB, EVENT = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"
DELIVERIES = [[JOB, EVENT, "t-1"], ["33333333-3333-3333-3333-333333333333", EVENT, None]]
EXTRA = {"kafka_key": JOB, "trace_id": "t-1", "kafka_record_headers": {"jobId": JOB}}
# Differ per message or per process by design; compared for shape only.
PER_MESSAGE = {"id", "root_id", "origin", "correlation_id", "delivery_tag"}


@pytest.fixture
def received():
    """Send one message by each route to its own queue; return both as received."""
    app = Celery("run-job-message-test", broker="memory://", set_as_current=False)
    with Connection("memory://") as connection:
        channel = connection.default_channel
        run_job_message.publish(
            channel, "ours", run_job_message.build(channel, DELIVERIES, dict(EXTRA))
        )
        with app.producer_or_acquire() as producer:
            app.send_task(
                run_job_message.RUN_JOBS_TASK,
                args=[DELIVERIES],
                queue="celerys",
                routing_key="celerys",
                producer=producer,
                headers=dict(EXTRA),
            )
        with app.connection_for_read() as reader:
            read = reader.default_channel
            yield read.basic_get("ours"), read.basic_get("celerys")
        channel.queue_purge("ours")


def test_the_headers_are_celerys_task_headers_with_ours_added(received):
    ours, celerys = received

    assert ours.headers.keys() == celerys.headers.keys()
    for name, value in celerys.headers.items():
        if name not in PER_MESSAGE:
            assert ours.headers[name] == value, name
    assert ours.headers["task"] == "jobweaver.executor.tasks.run_jobs"
    assert ours.headers["root_id"] == ours.headers["id"] == ours.properties["correlation_id"]
    assert ours.headers["trace_id"] == "t-1"


def test_the_body_decodes_to_the_same_arguments(received):
    ours, celerys = received

    assert (ours.content_type, ours.content_encoding) == (
        celerys.content_type,
        celerys.content_encoding,
    )
    assert ours.decode() == celerys.decode() == [[DELIVERIES], {}, run_job_message.NO_EMBED]
    assert json.loads(ours.body) == json.loads(celerys.body)


def test_the_properties_match_but_for_the_reply_queue_no_result_uses(received):
    ours, celerys = received

    # reply_to names a queue for RPC results; run_jobs returns none (ignore_result).
    assert ours.properties.keys() == celerys.properties.keys() - {"reply_to"}
    for name in ("delivery_mode", "priority", "body_encoding"):
        assert ours.properties[name] == celerys.properties[name], name
    assert ours.delivery_info["routing_key"] == "ours"
    assert ours.delivery_info["exchange"] == celerys.delivery_info["exchange"] == ""
