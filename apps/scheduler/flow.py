"""Flow control (ARCHITECTURE §4a): which executors are live, and how much each may be sent.

PostgreSQL is the queue; Kafka carries only what the live executors can start soon. Executors
register here (worker id, queues, slots, the run-job partitions they own) and renew that with a
heartbeat on the database clock; one silent for JOBWEAVER_WORKER_TTL_SECONDS is not live. An
executor's credits are its slots x JOBWEAVER_DISPATCH_PREFETCH minus the executions dispatched
to it or running on it; the dispatcher claims at most the sum, highest priority first, and
sends each delivery to a partition of the executor it was counted against, so an idle executor
takes work while a busy one holds no more than it can start.

Whenever a credit frees up — an execution leaves DISPATCHED or RUNNING, or an executor joins —
the transaction that freed it sends `NOTIFY jobweaver_dispatch`; the scheduler worker listens
and dispatches right after the commit (apps/scheduler/wakeup.py). The beat tick is the safety
net.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from django.conf import settings
from django.db import connection

from apps.core.db import assert_in_transaction
from apps.core.kafka import RUN_JOB, topic_name
from apps.scheduler.models import ExecutionStatus, ExecutorRegistration, JobExecution
from apps.scheduler.rows import status_literal

DISPATCH_CHANNEL = "jobweaver_dispatch"
# One dispatcher at a time, cluster-wide: credits are counted and spent under this lock.
DISPATCH_LOCK_KEY = 0x4A_57_44_53  # "JWDS"


@dataclass
class Credit:
    worker_id: str
    free: int
    partitions: list[int]


def notify_dispatch() -> None:
    """Wake the dispatcher when this transaction commits (NOTIFY is transactional: a rolled
    back transaction sends nothing, and one commit sends it once)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, '')", [DISPATCH_CHANNEL])


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
            cursor.execute("SELECT pg_notify(%s, '')", [DISPATCH_CHANNEL])


def executor_deregister(*, worker_id: str) -> None:
    """The executor stops: it gets no more credits at once (its deliveries still in flight are
    redelivered or rescued when their leases expire)."""
    ExecutorRegistration.objects.filter(worker_id=worker_id).delete()


def _live_filter_sql(ttl_seconds: float | None = None) -> str:
    """What "live" means, on the database clock: the TTL as a parameter, or written in."""
    ttl = "%s" if ttl_seconds is None else repr(float(ttl_seconds))
    return f"heartbeat_at > clock_timestamp() - make_interval(secs => {ttl})"


def live_executors() -> list[ExecutorRegistration]:
    """Executors whose heartbeat is fresh, on the database clock."""
    # Named columns, not *: a prepared statement's result must keep its shape across migrations.
    columns = ", ".join(f.column for f in ExecutorRegistration._meta.concrete_fields)
    return list(
        ExecutorRegistration.objects.raw(
            f"SELECT {columns} FROM {ExecutorRegistration._meta.db_table} "
            f"WHERE {_live_filter_sql()} ORDER BY worker_id",
            [settings.JOBWEAVER_WORKER_TTL_SECONDS],
        )
    )


def credits() -> list[Credit]:
    """Free credits of every live executor of run-job that owns partitions; must run inside
    the dispatch transaction (after `lock_dispatch`), so no other dispatcher spends them."""
    assert_in_transaction("credits")
    with connection.cursor() as cursor:
        cursor.execute(credits_sql())
        return credits_from(cursor.fetchall())


def credits_sql() -> str:
    """`credits`' query: rows of (worker_id, free, partitions), by worker id. The dispatcher
    reads it together with the rules, in one statement (dispatch._credits_and_rules)."""
    return _credits_sql(
        settings.JOBWEAVER_DISPATCH_PREFETCH,
        settings.JOBWEAVER_WORKER_TTL_SECONDS,
        topic_name(RUN_JOB),
    )


def credits_from(rows) -> list[Credit]:
    return [
        Credit(worker_id, free, json.loads(parts) if isinstance(parts, str) else parts)
        for worker_id, free, parts in rows
    ]


@functools.lru_cache(maxsize=8)
def _credits_sql(prefetch: int, ttl_seconds: float, queue: str) -> str:
    """`credits`' SQL with its values (settings, never input) and the statuses written in.
    With them as parameters PostgreSQL kept choosing a custom plan and planned 70% of the
    calls, 0.2 ms each, longer than the query ran (pg_stat_statements under make bench)."""
    registrations = ExecutorRegistration._meta.db_table
    executions = JobExecution._meta.db_table
    quoted_queue = "'" + queue.replace("'", "''") + "'"
    return f"""
        SELECT r.worker_id, r.slots * {int(prefetch)} - COALESCE(f.in_flight, 0) AS free,
            r.partitions
        FROM {registrations} r
        LEFT JOIN (
            SELECT worker_id, count(*) AS in_flight FROM {executions}
            WHERE status IN ({status_literal(ExecutionStatus.DISPATCHED)},
                             {status_literal(ExecutionStatus.RUNNING)})
            GROUP BY worker_id
        ) f USING (worker_id)
        WHERE r.{_live_filter_sql(ttl_seconds)}
          AND r.queues ? {quoted_queue}
          AND jsonb_array_length(r.partitions) > 0
        ORDER BY r.worker_id
        """


# Planner settings for the rest of a dispatch transaction (set_config(…, true) is local to it).
# Without bitmap scans, see `lock_dispatch`; one generic plan per statement, see
# lifecycle.dispatch_planning.
NO_BITMAP_SCANS = "set_config('enable_bitmapscan', 'off', true)"
GENERIC_PLANS = "set_config('plan_cache_mode', 'force_generic_plan', true)"


def lock_dispatch(*, planned: bool = False) -> None:
    """Serialize dispatchers (beat tick, submit fast path, wake-ups) for one transaction.

    In the same statement, bitmap scans are turned off for the rest of the transaction. The
    dispatch reads few live rows among many dead index entries: every job leaves two dead
    entries in execution_live_leases (DISPATCHED, RUNNING) until vacuum passes. A plain index
    scan marks the dead entries it visits as dead, and the next dispatch skips them; a bitmap
    scan cannot, so `credits` read them all on every dispatch (EXPLAIN ANALYZE under make
    bench: 4,241 entries for 6 live rows, 0.7 ms; 0.1 ms as an index scan).

    `planned`: a full dispatch (not the fast path's claim of given jobs) also sets
    lifecycle.dispatch_planning's settings here, not in a statement of their own: one round
    trip less in every dispatch of the line. The statements before its claim (credits, rules)
    have no parameters, so a generic plan is the plan they had."""
    assert_in_transaction("lock_dispatch")
    planner = f"{NO_BITMAP_SCANS}, {GENERIC_PLANS}" if planned else NO_BITMAP_SCANS
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT pg_advisory_xact_lock(%s), {planner}", [DISPATCH_LOCK_KEY])


def assign(count: int, credits: list[Credit]) -> list[tuple[str, int]]:
    """Pure: (worker id, partition) for each of `count` deliveries, in order, always taking
    the executor with the most free credits (ties by worker id). Spreading by free credits
    makes executors of different sizes fill in proportion.

    One call's deliveries to an executor all go to one of its partitions: librdkafka sends a
    produce request per partition, so a batch spread over five partitions cost the broker five
    requests and the executor's consumer as many fetches (under `make bench`, one produce
    request per job; with one partition per batch, the broker's CPU per job fell by 40-55% in
    alternating runs). Which partition rotates from call to call: it is the executor's free credits,
    which fall by one per delivery in flight, so successive single dispatches (the submit
    fast path) spread over its partitions."""
    free = {credit.worker_id: credit.free for credit in credits}
    partition = {
        credit.worker_id: credit.partitions[max(credit.free, 0) % len(credit.partitions)]
        for credit in credits
        if credit.partitions
    }
    chosen: list[tuple[str, int]] = []
    for _ in range(count if free else 0):
        worker_id = max(sorted(free), key=free.__getitem__)
        if free[worker_id] <= 0:
            break
        chosen.append((worker_id, partition[worker_id]))
        free[worker_id] -= 1
    return chosen
