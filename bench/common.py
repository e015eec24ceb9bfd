"""A throwaway JobWeaver stack for benchmarks: its own database (jobweaver_bench, recreated),
its own topic prefix, real worker processes. Needs PostgreSQL and Kafka up (infra/stack.sh)."""

from __future__ import annotations

import os
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BENCH_DB = "jobweaver_bench"


def configure(**overrides: str) -> None:
    """Set the benchmark's environment, then set up Django. Call once, before anything else."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "jobweaver_site.settings"
    os.environ.setdefault("DJANGO_DEBUG", "1")
    os.environ["JOBWEAVER_KAFKA_TOPIC_PREFIX"] = f"bench-{uuid.uuid4().hex[:8]}-"
    os.environ["DATABASE_URL"] = f"postgres://jobweaver@127.0.0.1:54329/{BENCH_DB}"
    os.environ["JOBWEAVER_LOG_LEVEL"] = "WARNING"
    os.environ.update(overrides)
    _recreate_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _recreate_database() -> None:
    import psycopg

    with psycopg.connect(
        "postgresql://jobweaver@127.0.0.1:54329/postgres", autocommit=True
    ) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {BENCH_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {BENCH_DB}")


@contextmanager
def running_stack(executors: int = 1):
    """Scheduler, beat and `executors` executor processes; yields once a probe job completed."""
    from django.conf import settings

    from apps.core.kafka import common_config, ensure_topics
    from apps.scheduler.beat import beat_schedule_setup
    from tests.stack import WorkerProcess, child_environment

    ensure_topics()
    beat_schedule_setup()
    env = child_environment()
    processes = [
        WorkerProcess("scheduler", "bench-scheduler", env),
        WorkerProcess("beat", "bench-beat", env),
    ]
    processes += [
        WorkerProcess("executor", f"bench-executor{i + 1}", env) for i in range(executors)
    ]
    try:
        for process in processes:
            process.start()
        for process in processes:
            process.wait_ready()
        wait_for_job(submit_steps([{"action": "LOG", "message": "probe"}]), timeout=90)
        yield processes
    finally:
        for process in processes:
            process.stop()
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(common_config())
        prefix = settings.JOBWEAVER_KAFKA_TOPIC_PREFIX
        ours = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
        if ours:
            for future in admin.delete_topics(ours, operation_timeout=10).values():
                future.result(timeout=15)


def submit_steps(steps: list[dict], **fields):
    """One job through the submission service; `fields` are further request fields (e.g.
    priority=9, maxRetryCount=2, runAt="2026-01-01T12:00:00Z")."""
    from apps.jobs.services import job_submit
    from apps.jobs.validation import parse_job_request

    body = {"jobType": "SIMULATION", "payload": {"steps": steps}, **fields}
    return job_submit(spec=parse_job_request(body)).job.id


def wait_for_job(job_id, *, status: str = "COMPLETED", timeout: float = 60) -> None:
    from apps.scheduler.models import JobExecution

    deadline = time.monotonic() + timeout
    while JobExecution.objects.get(job_id=job_id).status != status:
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} did not reach {status} in {timeout} s")
        time.sleep(0.01)


def submit_bulk(
    steps: list[dict],
    count: int,
    *,
    run_at,
    priority: int = 5,
    max_retries: int | None = None,
) -> list:
    """`count` identical jobs due at `run_at`, through the batch submission service
    (`apps.jobs.services.job_submit_batch`: bulk INSERTs of jobs, PENDING executions and
    job-created events, JOBWEAVER_MAX_BATCH_JOBS per transaction). Returns the job ids; the
    events are relayed by this process's outbox relay thread (`outbox_relay_pending` waits)."""
    from django.conf import settings

    from apps.core.timeutil import iso
    from apps.jobs.services import job_submit_batch
    from apps.jobs.validation import parse_job_request

    body = {
        "jobType": "SIMULATION",
        "payload": {"steps": steps},
        "priority": priority,
        "runAt": iso(run_at),
    }
    if max_retries is not None:
        body["maxRetryCount"] = max_retries
    spec = parse_job_request(body)
    per_batch = settings.JOBWEAVER_MAX_BATCH_JOBS
    ids = []
    for start in range(0, count, per_batch):
        jobs = job_submit_batch(specs=[spec] * min(per_batch, count - start))
        ids += [job.id for job in jobs]
    return ids
