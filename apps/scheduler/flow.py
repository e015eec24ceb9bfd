"""Executor presence for flow control (ARCHITECTURE §4a): which executors are live.

Executors register here (worker id, queues, slots, the run-job partitions they own) and renew
that with a heartbeat on the database clock; one silent for JOBWEAVER_WORKER_TTL_SECONDS is not
live. Their credits are counted by the engine's claim (apps/engine/claim/credits.py).
"""

from __future__ import annotations

import json

from django.db import connection

from jobweaver.conf import settings
from jobweaver.engine.claim import notify_dispatch
from jobweaver.scheduler.models import ExecutorRegistration, live_registration


def executor_heartbeat(
    *, worker_id: str, queues: list[str], slots: int, partitions: list[int], joined: bool
) -> None:
    """Register or renew a live executor (database clock). `joined` (first beat, or its
    partitions changed) wakes the dispatcher: there is new capacity to fill."""
    table = ExecutorRegistration._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {table} (worker_id, queues, slots, partitions, started_at, heartbeat_at)
            VALUES (%s, %s, %s, %s, clock_timestamp(), clock_timestamp())
            ON CONFLICT (worker_id) DO UPDATE SET
                queues = EXCLUDED.queues, slots = EXCLUDED.slots,
                partitions = EXCLUDED.partitions, heartbeat_at = EXCLUDED.heartbeat_at
            """,
            [worker_id, json.dumps(queues), slots, json.dumps(sorted(partitions))],
        )
    if joined:
        notify_dispatch()


def executor_deregister(*, worker_id: str) -> None:
    """The executor stops: it gets no more credits at once (its deliveries still in flight are
    redelivered or rescued when their leases expire)."""
    ExecutorRegistration.objects.filter(worker_id=worker_id).delete()


# What "live" means, on the database clock (parameter: JOBWEAVER_WORKER_TTL_SECONDS).
LIVE = live_registration()


def live_executors() -> list[ExecutorRegistration]:
    """Executors whose heartbeat is fresh, on the database clock."""
    # Named columns, not *: a prepared statement's result must keep its shape across migrations.
    columns = ", ".join(f.column for f in ExecutorRegistration._meta.concrete_fields)
    return list(
        ExecutorRegistration.objects.raw(
            f"SELECT {columns} FROM {ExecutorRegistration._meta.db_table} "
            f"WHERE {LIVE} ORDER BY worker_id",
            [settings.JOBWEAVER_WORKER_TTL_SECONDS],
        )
    )


def live_slots(conn) -> int:
    """The slots of the live executors the dispatcher may send to (those owning partitions),
    read on `conn`, a psycopg connection (the dispatcher's wake-up reads it on its own)."""
    row = conn.execute(
        f"SELECT COALESCE(sum(slots), 0) FROM {ExecutorRegistration._meta.db_table} "
        f"WHERE {LIVE} AND jsonb_array_length(partitions) > 0",
        [float(settings.JOBWEAVER_WORKER_TTL_SECONDS)],
    ).fetchone()
    return int(row[0])
