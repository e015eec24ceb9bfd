"""What pauses and per-key limits cost one dispatch claim, as a blocked backlog grows.

    infra/with-stack.sh .venv/bin/python bench/dispatch_rules.py

The dispatcher reads the rules (pauses, limits and the keys' use) and claims up to its credits
in one transaction, several hundred times a second under load. Work a rule holds back waits in
PostgreSQL; the question is whether every claim pays for reading it. On a database of its own,
with 1,000 waiting jobs in the default queue, this adds 50,000 waiting jobs of priority 9 that
a rule holds back, one case at a time, and prints the median time of a dispatch transaction
(rules + claim of 4, rolled back) and of reading the rules alone:

- a paused queue's backlog (read queue by queue since 0009: never read),
- a paused job type's backlog in the same queue as the open work, alone and with a queue
  paused as well,
- a key at its `max_running` limit with its backlog queued behind the open work,
- the same key's backlog queued ahead of the open work (set aside since 0011: out of the
  claim's line; the dispatches that set it aside, a batch each, are timed and printed too),
- a key at its limit whose backlog waits in a paused queue, and the same backlog set aside
  before the pause once the key has room again,
- a rate limit (`max_per_second`) over 70,000 keyed executions sent in the last hour, with
  no key at it and then with a key at it and its backlog ahead of the open work (the rate
  window must be read through its index, not by walking the history),
- many queues, with and without a pause (while anything is paused, the claim first looks
  down the line, and reads it per queue and job type, a probe and a read per line, only when
  paused work fills that look: as in the paused-backlog cases above).

Each measured dispatch does what `dispatch._claim` does: take the dispatch lock, read the
rules, set aside and put back (limits.py), claim.

The rows are written with SQL (no job runs), as the engine's store writes them
(apps/engine/store/executions.py, executions_insert).
"""

from __future__ import annotations

import statistics
import time
import uuid

from common import configure, drop_database

DATABASE = f"jobweaver_bench_rules_{uuid.uuid4().hex[:8]}"
CALLS = 20
BACKLOG = 50_000
# Keyed executions sent over the last hour, for the rate limit's case.
HISTORY = 70_000


def add_jobs(
    count: int,
    *,
    queue="default",
    priority=5,
    key=None,
    status="PENDING",
    age_s=1,
    job_type="SIMULATION",
    queues=1,
):
    """`count` jobs, each with an execution in `status`, due `age_s` seconds ago (SQL); spread
    over `queues` queues named `queue`-0, `queue`-1, … when more than one. Ownerless jobs: an
    execution carries its key as "\x1f<key>" (apps/engine/keys.py)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH j AS (
                INSERT INTO jobweaver_jobs_job (id, job_type, instruction, trace_id, traceparent,
                    request_fingerprint, priority, max_retries, timeout_seconds, created_at,
                    updated_at, queue_name, concurrency_key)
                SELECT gen_random_uuid(), %s, '{"steps": []}'::jsonb,
                    md5(random()::text), '', '', %s, 3, 60, now(), now(),
                    CASE WHEN %s = 1 THEN %s ELSE %s || '-' || (n %% %s) END, %s
                FROM generate_series(1, %s) AS n
                RETURNING id, priority, queue_name, concurrency_key, job_type)
            INSERT INTO jobweaver_scheduler_jobexecution (id, job_id, status, priority, retry_count,
                max_retries, next_run_at, attempt_count, version, updated_at, queue_name,
                job_type, concurrency_key, cancel_requested, last_error, worker_id,
                redelivery_count)
            SELECT gen_random_uuid(), id, %s, priority, 0, 3,
                now() - make_interval(secs => %s), 0, 1, now(), queue_name, job_type,
                chr(31) || concurrency_key, false, '', '', 0
            FROM j
            """,
            [job_type, priority, queues, queue, queue, queues, key, count, status, age_s],
        )
        cursor.execute("ANALYZE")


def settle() -> tuple[int, list[float]]:
    """The dispatches before the measured ones: each sets aside a batch of the blocked keys'
    waiting work (committed) until none is left in line. Returns how many set any aside, and
    the ms each took."""
    from django.db import transaction

    from jobweaver.engine import claim
    from jobweaver.engine.claim import rules as limits

    took = []
    while True:
        start = time.perf_counter()
        with transaction.atomic():
            claim.lock_dispatch(planned=True)
            rules = limits.dispatch_rules()
            if not claim.executions_set_aside(rules, batch=limits.SET_ASIDE_BATCH):
                return len(took), took
        took.append((time.perf_counter() - start) * 1000)


def dispatch_ms() -> tuple[float, float]:
    """Median ms of a dispatch's rules, set-aside, put-back and claim of 4 (rolled back), and
    of the rules alone."""
    from django.db import transaction

    from jobweaver.engine import claim
    from jobweaver.engine.claim import rules as limits

    whole, rules_only = [], []
    for _ in range(CALLS):
        start = time.perf_counter()
        with transaction.atomic():
            claim.lock_dispatch(planned=True)
            rules = limits.dispatch_rules()
            rules_only.append((time.perf_counter() - start) * 1000)
            claim.executions_set_aside(rules, batch=limits.SET_ASIDE_BATCH)
            claim.executions_put_back(rules)
            claimed = claim.executions_claim(limit=4, rules=rules, workers=["w"] * 4, planned=True)
            assert len(claimed) == 4, "the open work must be claimed"
            transaction.set_rollback(True)
        whole.append((time.perf_counter() - start) * 1000)
    return statistics.median(whole), statistics.median(rules_only)


def report(label: str) -> None:
    print(label)
    count, took = settle()
    if count:
        print(
            f"    set aside first, a batch per dispatch: {count} dispatches, "
            f"{statistics.median(took):.2f} ms each (median), {sum(took):.0f} ms in all"
        )
        whole, rules = dispatch_ms()
        print(
            f"    a dispatch before autovacuum has passed: {whole:.2f} ms ({rules:.2f} the rules)"
        )
        # What autovacuum does within seconds of so many changed rows (the queue tables' own
        # thresholds, scheduler.0007): the old row versions' index entries go, the planner
        # learns that rows are set aside.
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE jobweaver_scheduler_jobexecution")
    whole, rules = dispatch_ms()
    print(f"    a dispatch: {whole:.2f} ms ({rules:.2f} ms of it the rules)")


def main() -> None:
    configure(database=DATABASE)
    from django.db import connections
    from django.utils import timezone

    from jobweaver.scheduler.models import ConcurrencyLimit, Pause

    try:
        add_jobs(1_000)
        report("1,000 waiting, no rule")
        add_jobs(BACKLOG, queue="bulk", priority=9)
        Pause.objects.create(scope="QUEUE", name="bulk", paused_at=timezone.now())
        report(f"+ {BACKLOG:,} of a paused queue ahead of them")
        Pause.objects.all().delete()
        with connections["default"].cursor() as cursor:
            cursor.execute("DELETE FROM jobweaver_scheduler_jobexecution WHERE queue_name = 'bulk'")
        add_jobs(BACKLOG, priority=9, job_type="TASK")
        Pause.objects.create(scope="JOB_TYPE", name="TASK", paused_at=timezone.now())
        report(f"+ {BACKLOG:,} of a paused job type ahead of them, in the same queue")
        Pause.objects.create(scope="QUEUE", name="bulk", paused_at=timezone.now())
        report("  and a queue paused too")
        Pause.objects.all().delete()
        with connections["default"].cursor() as cursor:
            cursor.execute("DELETE FROM jobweaver_scheduler_jobexecution WHERE job_type = 'TASK'")
        ConcurrencyLimit.objects.create(pattern="customer-*", max_running=1)
        add_jobs(1, key="customer-x", status="RUNNING")
        add_jobs(BACKLOG, priority=5, key="customer-x", age_s=0)
        report(f"+ {BACKLOG:,} of a key at its limit, behind them")
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "UPDATE jobweaver_scheduler_jobexecution SET priority = 9 "
                "WHERE status = 'PENDING' AND concurrency_key = chr(31) || 'customer-x'"
            )
            # As if they had come in line ahead (the bench measures what a flood ahead costs,
            # and one already set aside costs nothing more)
            cursor.execute(
                "UPDATE jobweaver_scheduler_jobexecution SET set_aside = false "
                "WHERE status = 'PENDING' AND concurrency_key = chr(31) || 'customer-x'"
            )
            cursor.execute("ANALYZE")
        report(f"  the same {BACKLOG:,} ahead of them (priority 9)")
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "UPDATE jobweaver_scheduler_jobexecution "
                "SET status = 'COMPLETED', finished_at = now() "
                "WHERE status = 'RUNNING' AND concurrency_key = chr(31) || 'customer-x'"
            )
        report("  the key has room again: its best one goes back in line")
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "DELETE FROM jobweaver_scheduler_jobexecution WHERE concurrency_key IS NOT NULL"
            )
        add_jobs(1, key="customer-y", status="RUNNING")
        add_jobs(BACKLOG, queue="bulk", priority=9, key="customer-y")
        Pause.objects.create(scope="QUEUE", name="bulk", paused_at=timezone.now())
        report(f"+ {BACKLOG:,} of a key at its limit, in a paused queue")
        with connections["default"].cursor() as cursor:
            # As if set aside before the pause came
            cursor.execute(
                "UPDATE jobweaver_scheduler_jobexecution SET set_aside = true "
                "WHERE status = 'PENDING' AND concurrency_key = chr(31) || 'customer-y'"
            )
            cursor.execute(
                "UPDATE jobweaver_scheduler_jobexecution "
                "SET status = 'COMPLETED', finished_at = now() "
                "WHERE status = 'RUNNING' AND concurrency_key = chr(31) || 'customer-y'"
            )
            cursor.execute("ANALYZE")
        report("  set aside before the queue was paused, and the key has room again")
        Pause.objects.all().delete()
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "DELETE FROM jobweaver_scheduler_jobexecution WHERE concurrency_key IS NOT NULL"
            )
        ConcurrencyLimit.objects.all().delete()
        ConcurrencyLimit.objects.create(pattern="api-*", max_per_second=5)
        add_jobs(HISTORY, key="api-old", status="COMPLETED")
        add_jobs(5, key="api-hot", status="DISPATCHED")
        with connections["default"].cursor() as cursor:
            # A history of keyed executions sent over the last hour, over 16 keys: what the
            # rate window's read must not walk. The key at its rate was sent "in the future", so
            # that it stays in the window for the whole case, however long it takes.
            cursor.execute(
                "UPDATE jobweaver_scheduler_jobexecution SET "
                "concurrency_key = 'api-' || substr(md5(id::text), 1, 1), "
                "dispatched_at = now() - random() * interval '1 hour', finished_at = now() "
                "WHERE concurrency_key = 'api-old'"
            )
            cursor.execute(
                "UPDATE jobweaver_scheduler_jobexecution "
                "SET dispatched_at = now() + interval '1 hour' "
                "WHERE concurrency_key = 'api-hot'"
            )
            cursor.execute("ANALYZE")
        report(f"{HISTORY:,} keyed executions sent in the last hour; a rate limit, no key at it")
        add_jobs(BACKLOG, priority=9, key="api-hot", age_s=0)
        report(f"+ {BACKLOG:,} of a key at its rate limit, ahead of the open work")
        ConcurrencyLimit.objects.all().delete()
        with connections["default"].cursor() as cursor:
            cursor.execute("DELETE FROM jobweaver_scheduler_jobexecution")
        add_jobs(10_000, queue="tenant", queues=1_000)
        report("10,000 waiting in 1,000 queues, no rule")
        Pause.objects.create(scope="QUEUE", name="elsewhere", paused_at=timezone.now())
        report("  and a queue paused (empty): the claim's look down the line finds the open work")
    finally:
        connections.close_all()
        drop_database(DATABASE)


if __name__ == "__main__":
    main()
