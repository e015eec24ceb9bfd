"""Many tenants, one job each at a time: what a per-key limit costs the stack's throughput.

    infra/with-stack.sh .venv/bin/python bench/tenants.py [--tenants 40] [--per-tenant 100]

The multi-tenant use of concurrency keys (README, "Concurrency limits"): a key per customer,
`maxRunning` 1, each customer's jobs submitted together (one batch request after another, so
each customer's jobs stand one after another in the line). On the real stack (scheduler, beat,
one executor, gunicorn), the same LOG jobs are run three ways, in turn: without a key; with a
key per tenant and no limit; with a key per tenant and the limit of one. Prints, for each,
jobs/s from the first submit to the last COMPLETED and the attempts in progress on average.
With as many tenants as the executor has credits or more, the limit should cost little: the
executor's slots can be kept busy with one job of each of several tenants.
"""

from __future__ import annotations

import argparse
import time
import uuid

from common import api_token, configure, drop_database, running_stack, running_web
from throughput import Client, execution_counts

DATABASE = f"jobweaver_bench_tenants_{uuid.uuid4().hex[:8]}"
LOG_JOB = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "t"}]}}
DONE_POLL_SECONDS = 0.5


def submit(client: Client, *, tenants: int, per_tenant: int, keyed: bool) -> None:
    """Each tenant's jobs in batches of at most 1,000, tenant after tenant."""
    for tenant in range(tenants):
        job = {**LOG_JOB, "concurrencyKey": f"tenant-{tenant}"} if keyed else LOG_JOB
        for start in range(0, per_tenant, 1000):
            client.post_jobs([job] * min(1000, per_tenant - start))


def run_side(client: Client, args, *, keyed: bool, limited: bool) -> tuple[float, float]:
    from django.db import connection

    from jobweaver.scheduler.services import concurrency_limit_delete, concurrency_limit_set

    if limited:
        concurrency_limit_set(pattern="tenant-*", max_running=1, max_per_second=None)
    n = args.tenants * args.per_tenant
    baseline = execution_counts()
    started = time.time()
    submit(client, tenants=args.tenants, per_tenant=args.per_tenant, keyed=keyed)
    deadline = time.monotonic() + args.timeout
    while execution_counts(baseline).get("COMPLETED", 0) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"not all {n} jobs COMPLETED in {args.timeout} s")
        # The time measured comes from the database (the last finished_at), not from when this
        # loop notices: it polls rarely, as each poll scans every execution (5.5 ms with
        # 20,000), PostgreSQL work on the cores the stack shares.
        time.sleep(DONE_POLL_SECONDS)
    with connection.cursor() as cursor:
        # Attempts in progress on average, on the database clock: the executor's busy slots.
        cursor.execute(
            """
            SELECT extract(epoch FROM max(finished_at) - to_timestamp(%s)),
                   sum(extract(epoch FROM finished_at - started_at))
                       / extract(epoch FROM max(finished_at) - min(started_at))
            FROM jobweaver_scheduler_jobexecution WHERE started_at >= to_timestamp(%s)
            """,
            [started, started],
        )
        elapsed, busy = cursor.fetchone()
    if limited:
        concurrency_limit_delete(pattern="tenant-*")
    return n / float(elapsed), float(busy)


def idle_batch(client: Client, *, tenants: int, jobs_each: int) -> list[float]:
    """On a quiet stack, one batch holding `jobs_each` jobs of each of `tenants` tenants, tenant
    after tenant, limit 1: ms from the submit until each tenant's first job started."""
    from django.db import connection

    from jobweaver.scheduler.services import concurrency_limit_delete, concurrency_limit_set

    time.sleep(2)  # quiet: the scheduler's wake-up thread is waiting for a notification
    jobs = [
        {**LOG_JOB, "concurrencyKey": f"idle-tenant-{tenant}"}
        for tenant in range(tenants)
        for _ in range(jobs_each)
    ]
    concurrency_limit_set(pattern="idle-tenant-*", max_running=1, max_per_second=None)
    submitted = time.time()
    client.post_jobs(jobs)
    deadline = time.monotonic() + 30
    query = """
        SELECT j.concurrency_key, min(extract(epoch FROM e.started_at))
        FROM jobweaver_scheduler_jobexecution e JOIN jobweaver_jobs_job j ON j.id = e.job_id
        WHERE j.concurrency_key LIKE 'idle-tenant-%%' AND e.started_at IS NOT NULL
        GROUP BY 1
        """
    while True:
        with connection.cursor() as cursor:
            cursor.execute(query)
            firsts = cursor.fetchall()
        if len(firsts) == tenants or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    concurrency_limit_delete(pattern="idle-tenant-*")
    return sorted((float(started) - submitted) * 1000 for _, started in firsts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tenants", type=int, default=40, help="tenants (40)")
    parser.add_argument("--per-tenant", type=int, default=100, help="jobs per tenant (100)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the three ways (2)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per side (300)")
    parser.add_argument(
        "--idle-batch",
        type=int,
        default=0,
        metavar="T",
        help="instead: one batch of T tenants' jobs on a quiet stack; when each tenant started",
    )
    parser.add_argument(
        "--ways",
        default="none,keys,limit",
        help="which of the three ways, comma-separated (none,keys,limit)",
    )
    args = parser.parse_args()
    n = args.tenants * args.per_tenant
    configure(
        database=DATABASE,
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="bench-" + DATABASE,
        # Inherited by the stack's processes (tests.stack.child_environment) and gunicorn.
        JOBWEAVER_SUBMIT_THROTTLE_RATE=str(100 * n),
        JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER=str(10 * n),
        JOBWEAVER_SECURE_SSL_REDIRECT="0",
    )
    ways = {
        "none": ("no key", False, False),
        "keys": ("a key per tenant, no limit", True, False),
        "limit": ("a key per tenant, maxRunning 1", True, True),
    }
    try:
        sides = [ways[way.strip()] for way in args.ways.split(",") if way.strip()]
    except KeyError as exc:
        parser.error(f"unknown way {exc}")
    try:
        with running_stack(executors=1), running_web() as (base, _):
            client = Client(base, api_token())
            if args.idle_batch:
                started = idle_batch(client, tenants=args.idle_batch, jobs_each=10)
                print(
                    f"one batch of {args.idle_batch} tenants x 10 jobs on a quiet stack, limit "
                    f"1 each: each tenant's first job started after (ms) "
                    + ", ".join(f"{ms:.0f}" for ms in started)
                )
                return
            for number in range(1, args.rounds + 1):
                for label, keyed, limited in sides:
                    rate, busy = run_side(client, args, keyed=keyed, limited=limited)
                    print(
                        f"round {number}  {label:<32} {rate:6.0f} jobs/s, "
                        f"{busy:.2f} attempts in progress on average",
                        flush=True,
                    )
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(DATABASE)
    print(f"{args.tenants} tenants x {args.per_tenant} LOG jobs, submitted tenant after tenant")


if __name__ == "__main__":
    main()
