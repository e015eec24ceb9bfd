"""The broker and the database restarted under load: every job still completes, none twice.

These restart the shared PostgreSQL and Kafka of the dev stack (infra/stack.sh), so they run
last in the session (pytest_collection_modifyitems in conftest.py orders them)."""

from __future__ import annotations

import subprocess
import time

import pytest
from django.db import connection

from jobweaver.scheduler.models import JobExecution
from tests.integration.test_scaling import (
    assert_each_job_succeeded_once,
    ensure_executors,
    submit_many,
    wait_all_completed,
)
from tests.stack import ROOT, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.restarts_infrastructure]


def restart(part: str) -> float:
    started = time.monotonic()
    subprocess.run(
        [str(ROOT / "infra" / "stack.sh"), f"restart-{part}"],
        check=True,
        timeout=180,
        capture_output=True,
    )
    return time.monotonic() - started


def completed(job_ids) -> int:
    return JobExecution.objects.filter(job_id__in=job_ids, status="COMPLETED").count()


def time_to_recover(job_ids, restarted_at: float) -> float:
    """Seconds from the end of the restart until jobs complete again."""
    connection.close()
    done = completed(job_ids)
    wait_for(lambda: completed(job_ids) > done, timeout=120, message="jobs to complete again")
    return time.monotonic() - restarted_at


def test_kafka_restart_during_a_500_job_burst(stack, live_db):
    ensure_executors(stack, 3)
    # ~12 s of work for 3 executors x 4 threads: the restart lands in the middle of it.
    job_ids = submit_many(500, [{"action": "SLEEP", "durationMs": 300}])
    wait_for(lambda: completed(job_ids) >= 50, timeout=60, message="the burst to be under way")

    before = completed(job_ids)
    downtime = restart("kafka")
    recovered = time_to_recover(job_ids, time.monotonic())
    print(
        f"kafka restarted ({downtime:.1f} s) after {before} of 500 had completed; "
        f"jobs completing again {recovered:.1f} s later"
    )
    assert before < 400, "the burst was nearly over before the restart; make the jobs longer"

    wait_all_completed(job_ids, timeout=300)
    assert_each_job_succeeded_once(job_ids)


def test_postgresql_restart_during_300_running_jobs(stack, live_db):
    ensure_executors(stack, 3)
    job_ids = submit_many(300, [{"action": "SLEEP", "durationMs": 500}])
    wait_for(lambda: completed(job_ids) >= 30, timeout=60, message="the burst to be under way")

    before = completed(job_ids)
    connection.close()
    downtime = restart("postgres")
    recovered = time_to_recover(job_ids, time.monotonic())
    print(
        f"postgresql restarted ({downtime:.1f} s) after {before} of 300 had completed; "
        f"jobs completing again {recovered:.1f} s later"
    )
    assert before < 250, "the burst was nearly over before the restart; make the jobs longer"

    wait_all_completed(job_ids, timeout=300)
    assert_each_job_succeeded_once(job_ids)
