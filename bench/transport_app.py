"""The Celery app of the transport benchmark: one no-op task that records its run.

Configured from the environment by bench/transport_bench.py: BENCH_BROKER_URL,
BENCH_TRANSPORT_OPTIONS (JSON), BENCH_QUEUE, BENCH_DSN. Not Django: only the transport and
Celery are measured.

The task is idempotent the way JobWeaver's executor is (fenced by a key): it claims its key in
PostgreSQL; a delivery whose key was already claimed is counted as a duplicate delivery and does
no work, so "ran twice" is impossible by construction and redeliveries are measured instead.
"""

from __future__ import annotations

import json
import os
import threading
import time

import psycopg
from celery import Celery
from kombu import Queue

import kombu_kafka

kombu_kafka.register()

QUEUE = os.environ.get("BENCH_QUEUE", "bench-noop")
app = Celery("bench")
app.conf.update(
    broker_url=os.environ.get("BENCH_BROKER_URL", "jobweaver-kafka://127.0.0.1:19092"),
    broker_transport_options=json.loads(os.environ.get("BENCH_TRANSPORT_OPTIONS", "{}")),
    broker_connection_retry_on_startup=True,
    task_queues=[Queue(QUEUE, routing_key=QUEUE)],
    task_default_queue=QUEUE,
    task_acks_late=True,
    # make bench-transport gives both transports this window; bench/throughput.py passes
    # --prefetch-multiplier to hold as many messages per thread as our executor does.
    worker_prefetch_multiplier=1,
    worker_enable_remote_control=False,
    worker_send_task_events=False,
    task_ignore_result=True,
    worker_hijack_root_logger=False,
)

_local = threading.local()


def _db() -> psycopg.Connection:
    if getattr(_local, "conn", None) is None:
        _local.conn = psycopg.connect(os.environ["BENCH_DSN"], autocommit=True)
    return _local.conn


@app.task(name="bench.noop")
def noop(run_id: str, key: int, work_ms: float = 0) -> None:
    claimed = (
        _db()
        .execute(
            "INSERT INTO bench_runs (run_id, key, pid) VALUES (%s, %s, %s) "
            "ON CONFLICT DO NOTHING RETURNING key",
            (run_id, key, os.getpid()),
        )
        .fetchone()
    )
    if claimed is None:
        _db().execute(
            "INSERT INTO bench_duplicates (run_id, key, pid) VALUES (%s, %s, %s)",
            (run_id, key, os.getpid()),
        )
        return
    if work_ms:
        time.sleep(work_ms / 1000)
