"""The run-job message, built here rather than by Celery's `send_task`.

The executor is a Celery worker and reads run_jobs as an ordinary Celery task message (message
protocol 2: https://docs.celeryq.dev/en/stable/internals/protocol.html). What Celery's
`send_task` adds on top of that format — routing lookups, queue declaration per message,
publish signals, a retry policy, a copy of every entity — is scheduler CPU spent on every
message, many times the channel's own cost (bench/NOTES.md). Dispatch sends one per executor
partition and dispatch round, so it writes the protocol's fields itself and hands the message to
the kombu channel, which serializes and produces it as for any other message (kombu_kafka's
headers for key, partition and record headers included).

One message carries every delivery of a dispatch round for one executor partition (its one
argument: [[job id, event id, trace id], ...]): the executor starts them in one statement and
acknowledges the record once all of them ended (apps/executor/runner.py).

`apps/scheduler/tests/unit/test_run_job_message.py` holds this against the message Celery
itself builds, so an upgrade of Celery that changes the protocol fails a test, not the executor.
"""

from __future__ import annotations

import json
import os
import uuid

from jobweaver.core.host import host_name

# The executor's task, named rather than imported: the scheduler never imports the executor's
# runtime (ARCHITECTURE §2).
RUN_JOBS_TASK = "jobweaver.executor.tasks.run_jobs"
CONTENT_TYPE = "application/json"
CONTENT_ENCODING = "utf-8"
# The protocol's third body element: no callbacks, errbacks, chain or chord.
NO_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}
# Persistent, as Celery marks task messages (kombu's PERSISTENT_DELIVERY_MODE).
DELIVERY_MODE = 2


def _origin() -> str:
    return f"gen{os.getpid()}@{host_name()}"  # what Celery's anon_nodename() gives


def build(channel, deliveries: list[list[str | None]], headers: dict) -> dict:
    """The kombu message of one run_jobs(deliveries) task on `channel` — each delivery
    [job id, event id, trace id or None] — with the extra message `headers` (kombu_kafka's
    routing headers, a lone delivery's trace id)."""
    task_id = str(uuid.uuid4())
    args = [deliveries]
    task_headers = {
        "lang": "py",
        "task": RUN_JOBS_TASK,
        "id": task_id,
        "shadow": None,
        "eta": None,
        "expires": None,
        "group": None,
        "group_index": None,
        "retries": 0,
        "timelimit": [None, None],
        "root_id": task_id,
        "parent_id": None,
        "argsrepr": repr(args),
        "kwargsrepr": "{}",
        "origin": _origin(),
        "ignore_result": None,
        "replaced_task_nesting": 0,
        "stamped_headers": None,
        "stamps": {},
        **headers,
    }
    return channel.prepare_message(
        json.dumps([args, {}, NO_EMBED]),
        priority=0,
        content_type=CONTENT_TYPE,
        content_encoding=CONTENT_ENCODING,
        headers=task_headers,
        properties={"correlation_id": task_id, "delivery_mode": DELIVERY_MODE},
    )


def publish(channel, queue: str, message: dict) -> None:
    """Send a built message to `queue` through kombu's default exchange, as kombu's Producer
    does for a queue named by its routing key."""
    channel.basic_publish(message, exchange="", routing_key=queue)
