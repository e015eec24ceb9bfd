"""The Celery app of the transport benchmark and of stock Celery in `make bench`: one no-op task
that records its run.

Configured from the environment by bench/transport_bench.py and bench/throughput.py:
BENCH_BROKER_URL (our Kafka transport, kombu's stock `confluentkafka`, or `redis://`),
BENCH_TRANSPORT_OPTIONS (JSON), BENCH_QUEUE, BENCH_DSN, and BENCH_CELERY_DEFAULTS=1 for
Celery's own defaults (throughput.py; BENCH_CELERY_ACKS_LATE=1 for acks late) instead of the
transport benchmark's acks late and prefetch window of 1. Not Django: only the transport and
Celery are measured. It runs in .venv or, on Redis, in the bench venv
(bench/requirements-bench-venv.txt: the redis client).

    python -m bench.transport_app enqueue    # the publisher process (bench/enqueuer.py)

The task is idempotent the way JobWeaver's executor is (fenced by a key): it claims its key in
PostgreSQL; a delivery whose key was already claimed is counted as a duplicate delivery and does
no work, so "ran twice" is impossible by construction and redeliveries are measured instead.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import psycopg
from celery import Celery
from kombu import Queue

BROKER_URL = os.environ.get("BENCH_BROKER_URL", "jobweaver-kafka://127.0.0.1:19092")
if BROKER_URL.startswith("jobweaver-kafka://"):
    # Imported only for our transport: the bench venv (Celery on Redis) has no confluent_kafka.
    import kombu_kafka

    kombu_kafka.register()

QUEUE = os.environ.get("BENCH_QUEUE", "bench-noop")
app = Celery("bench")
app.conf.update(
    broker_url=BROKER_URL,
    broker_transport_options=json.loads(os.environ.get("BENCH_TRANSPORT_OPTIONS", "{}")),
    broker_connection_retry_on_startup=True,
    task_queues=[Queue(QUEUE, routing_key=QUEUE)],
    task_default_queue=QUEUE,
    worker_hijack_root_logger=False,
)
if os.environ.get("BENCH_CELERY_ACKS_LATE") == "1":  # throughput.py --celery-acks-late
    app.conf.task_acks_late = True
if os.environ.get("BENCH_CELERY_DEFAULTS") != "1":
    app.conf.update(
        task_acks_late=True,
        # make bench-transport gives both transports this window.
        worker_prefetch_multiplier=1,
        worker_enable_remote_control=False,
        worker_send_task_events=False,
        task_ignore_result=True,
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


def enqueue_forever() -> None:
    """The publisher of bench/throughput.py: send_task on one producer, held between runs."""
    from bench.enqueuer import serve

    with app.producer_or_acquire() as producer:

        def publish(run_id: str, count: int) -> None:
            for key in range(count):
                app.send_task(
                    "bench.noop",
                    args=[run_id, key, 0],
                    queue=QUEUE,
                    routing_key=QUEUE,
                    producer=producer,
                )

        serve(publish)


if __name__ == "__main__":
    if sys.argv[1:] != ["enqueue"]:
        sys.exit("usage: python -m bench.transport_app enqueue")
    enqueue_forever()
