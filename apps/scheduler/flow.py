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
from jobweaver.engine.claim.credits import window_sql
from jobweaver.scheduler.models import ExecutorRegistration, live_registration


def executor_heartbeat(
    *,
    worker_id: str,
    queues: list[str],
    slots: int,
    partitions: list[int],
    joined: bool,
    prefetch: int | None = None,
) -> None:
    """Register or renew a live executor (database clock), with the deliveries a slot it asks
    for (`prefetch`; None: JOBWEAVER_DISPATCH_PREFETCH). `joined` (first beat, its partitions
    changed, or it asks for more) wakes the dispatcher: there is new capacity to fill."""
    table = ExecutorRegistration._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {table}
                (worker_id, queues, slots, partitions, prefetch, started_at, heartbeat_at)
            VALUES (%s, %s, %s, %s, %s, clock_timestamp(), clock_timestamp())
            ON CONFLICT (worker_id) DO UPDATE SET
                queues = EXCLUDED.queues, slots = EXCLUDED.slots,
                partitions = EXCLUDED.partitions, prefetch = EXCLUDED.prefetch,
                heartbeat_at = EXCLUDED.heartbeat_at
            """,
            [worker_id, json.dumps(queues), slots, json.dumps(sorted(partitions)), prefetch],
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


def live_window(conn) -> int:
    """The credits of the live executors the dispatcher may send to (those owning partitions)
    with nothing in flight: their slots x their prefetch (ARCHITECTURE §4a). Read on `conn`, a
    psycopg connection (the dispatcher's wake-up reads it on its own)."""
    table = ExecutorRegistration._meta.db_table
    row = conn.execute(
        f"SELECT COALESCE(sum({window_sql('r')}), 0) FROM {table} r "
        f"WHERE r.{LIVE} AND jsonb_array_length(r.partitions) > 0",
        [float(settings.JOBWEAVER_WORKER_TTL_SECONDS)],
    ).fetchone()
    return int(row[0])
