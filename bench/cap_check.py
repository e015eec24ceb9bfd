"""What the active-jobs cap check costs a submission, as a user's history and the backlog grow.

    infra/with-stack.sh .venv/bin/python bench/cap_check.py

Every submission of a user with a cap (JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER) counts that user's
waiting and running jobs under the user's advisory lock (apps/jobs/services.py). On a database
of its own, this gives one user 100 waiting jobs and 1,000, 10,000 and 100,000 finished ones,
then adds another user's 50,000 waiting jobs, and prints the count's median time at each step.
The rows are written with SQL (no job runs), as the engine's store writes them
(apps/engine/store/executions.py,
executions_insert) (the submitter copied onto the execution): only the count is measured.
"""

from __future__ import annotations

import statistics
import time
import uuid

from common import configure, drop_database

DATABASE = f"jobweaver_bench_cap_{uuid.uuid4().hex[:8]}"
CALLS = 20


def add_jobs(user, count: int, status: str) -> None:
    """`count` jobs of `user`, each with an execution in `status` (SQL, for speed)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH j AS (
                INSERT INTO jobweaver_jobs_job (id, job_type, instruction, trace_id, traceparent,
                    request_fingerprint, priority, max_retries, timeout_seconds,
                    submitted_by_id, created_at, updated_at, queue_name, concurrency_key)
                SELECT gen_random_uuid(), 'SIMULATION', '{"steps": []}'::jsonb,
                    md5(random()::text), '', '', 5, 3, 60, %s, now(), now(), 'default', ''
                FROM generate_series(1, %s)
                RETURNING id, submitted_by_id)
            INSERT INTO jobweaver_scheduler_jobexecution (id, job_id, status, priority, retry_count,
                max_retries, next_run_at, attempt_count, version, updated_at, queue_name,
                job_type, concurrency_key, cancel_requested, last_error, worker_id,
                redelivery_count, submitted_by_id)
            SELECT gen_random_uuid(), id, %s, 5, 0, 3, now(), 1, 1, now(), 'default',
                'SIMULATION', '', false, '', '', 0, submitted_by_id
            FROM j
            """,
            [user.pk, count, status],
        )
        cursor.execute("ANALYZE")


def median_ms(user) -> tuple[int, float]:
    from jobweaver.jobs.selectors import active_job_count

    times, count = [], 0
    for _ in range(CALLS):
        start = time.perf_counter()
        count = active_job_count(user=user)
        times.append((time.perf_counter() - start) * 1000)
    return count, statistics.median(times)


def main() -> None:
    configure(database=DATABASE)
    from django.contrib.auth import get_user_model
    from django.db import connections

    users = get_user_model().objects
    try:
        user = users.create(username="history")
        add_jobs(user, 100, "PENDING")
        finished = 0
        for total in (1_000, 10_000, 100_000):
            add_jobs(user, total - finished, "COMPLETED")
            finished = total
            active, ms = median_ms(user)
            print(f"{finished:>7,} finished, {active} waiting: {ms:6.2f} ms a count")
        other = users.create(username="backlog")
        add_jobs(other, 50_000, "PENDING")
        for who in (user, other):
            active, ms = median_ms(who)
            label = f"{who.username} ({active} waiting)"
            print(f"with another user's 50,000 waiting: {label} {ms:6.2f} ms")
    finally:
        connections.close_all()
        drop_database(DATABASE)


if __name__ == "__main__":
    main()
