"""Retention under load: prune 100,000 finished jobs while jobs are submitted and dispatched.

    infra/with-stack.sh .venv/bin/python bench/prune.py [N_FINISHED] [SAMPLES]

Seeds N_FINISHED (100,000) COMPLETED jobs finished 8 days ago — each with its execution, one
attempt and two published outbox events, inserted by SQL because the submission path is not
what is measured — on a stack of its own (database jobweaver_bench_prune, scheduler, beat, one
executor). Then it submits one-step jobs one at a time through the submission service and
measures, before pruning and while `retention_prune` runs in another thread:

- submit: the `job_submit` call (one transaction, then the fast-path dispatch after commit);
- submit→dispatched and submit→RUNNING: from calling the service to the execution's
  `dispatched_at` / `started_at` (this machine's clock and the database's: same host).

It also prints the prune's duration, its batches and the slowest batch (a batch is one short
transaction; that is the longest any row lock is held). Quote medians: the machine is noisy.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
from datetime import UTC, datetime

import common

N_FINISHED = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
SAMPLES = int(sys.argv[2]) if len(sys.argv) > 2 else 40
common.BENCH_DB = "jobweaver_bench_prune"  # never the database of another running benchmark

SEED_SQL = """
CREATE TEMP TABLE seed AS
    SELECT gen_random_uuid() AS id, clock_timestamp() - interval '8 days' AS t
    FROM generate_series(1, %(n)s);
INSERT INTO jobweaver_jobs_job (id, job_type, instruction, trace_id, request_fingerprint, priority,
    max_retries, timeout_seconds, queue_name, created_at, updated_at)
SELECT id, 'SIMULATION', '{"steps": [{"action": "LOG", "message": "old"}]}',
    replace(id::text, '-', ''), '', 5, 3, 300, 'default', t, t FROM seed;
INSERT INTO jobweaver_scheduler_jobexecution
    (id, job_id, status, priority, retry_count, max_retries,
    next_run_at, attempt_count, cancel_requested, last_error, dispatched_at, started_at,
    finished_at, version, updated_at, worker_id, redelivery_count)
SELECT gen_random_uuid(), id, 'COMPLETED', 5, 0, 3, t, 1, false, '', t, t, t, 3, t,
    'bench:1', 0 FROM seed;
INSERT INTO jobweaver_executor_executionattempt (event_id, job_id, attempt, trace_id, worker_id,
    started_at, finished_at, outcome, error_message, steps_completed, total_steps, log_lines,
    exception_type, traceback)
SELECT gen_random_uuid(), id, 1, replace(id::text, '-', ''), 'bench:1', t, t, 'SUCCESS', '', 1,
    1, '["old"]', '', '' FROM seed;
INSERT INTO jobweaver_outbox_outboxevent
    (id, topic, key, payload, trace_id, created_at, published_at,
    publish_attempts)
SELECT gen_random_uuid(), v.topic, id::text, json_build_object('jobId', id), '', t, t, 1
FROM seed CROSS JOIN (VALUES ('job-created'), ('job-completed')) AS v(topic);
DROP TABLE seed;
"""


def seed() -> float:
    from django.db import connection, transaction

    t0 = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = 0")
        cursor.execute(SEED_SQL, {"n": N_FINISHED})
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return time.monotonic() - t0


def sample() -> tuple[float, float, float]:
    """(submit, submit→dispatched, submit→RUNNING) of one job, in seconds."""
    from jobweaver.scheduler.models import JobExecution

    submitted = datetime.now(UTC)
    t0 = time.monotonic()
    job_id = common.submit_steps([{"action": "LOG", "message": "prune bench"}])
    submit = time.monotonic() - t0
    common.wait_for_job(job_id, timeout=60)
    execution = JobExecution.objects.get(job_id=job_id)
    return (
        submit,
        (execution.dispatched_at - submitted).total_seconds(),
        (execution.started_at - submitted).total_seconds(),
    )


def report(label: str, samples: list[tuple[float, float, float]]) -> None:
    def stats(values: list[float]) -> str:
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
        return (
            f"median {statistics.median(ordered) * 1000:6.1f} ms  p95 {p95 * 1000:6.1f} ms  "
            f"max {ordered[-1] * 1000:6.1f} ms"
        )

    print(f"{label} ({len(samples)} jobs)")
    for name, index in (("submit", 0), ("submit→dispatched", 1), ("submit→RUNNING", 2)):
        print(f"  {name:18} {stats([s[index] for s in samples])}")


def main() -> None:
    common.configure()
    from jobweaver.scheduler import retention
    from jobweaver.scheduler.models import JobExecution

    batch_seconds: list[float] = []

    def timed(batch):
        def run(*args, **kwargs):
            t0 = time.monotonic()
            try:
                return batch(*args, **kwargs)
            finally:
                batch_seconds.append(time.monotonic() - t0)

        return run

    # Instrumentation only: every batch of the prune is timed.
    retention._prune_jobs_batch = timed(retention._prune_jobs_batch)
    retention._prune_outbox_batch = timed(retention._prune_outbox_batch)

    with common.running_stack(executors=1):
        print(f"seeded {N_FINISHED} finished jobs in {seed():.1f} s")
        print(f"prune --dry-run: {retention.retention_preview()}")
        report("before pruning", [sample() for _ in range(SAMPLES)])

        outcome: dict = {}

        def prune() -> None:
            t0 = time.monotonic()
            outcome["pruned"] = retention.retention_prune()
            outcome["seconds"] = time.monotonic() - t0

        pruner = threading.Thread(target=prune)
        pruner.start()
        during = []
        while pruner.is_alive():
            during.append(sample())
        pruner.join()
        report("during pruning", during)
        print(
            f"pruned {outcome['pruned']} in {outcome['seconds']:.1f} s: {len(batch_seconds)} "
            f"batches, median {statistics.median(batch_seconds) * 1000:.0f} ms, slowest "
            f"{max(batch_seconds) * 1000:.0f} ms"
        )
        print(f"executions left: {JobExecution.objects.count()}")


if __name__ == "__main__":
    main()
