"""Throughput of Python tasks (`add.enqueue`, ARCHITECTURE §13) against simulation jobs (one
LOG step) on the same stack: one executor process; each round writes its jobs in one
transaction through the ordinary submission path and is timed from the first submit until
every job is COMPLETED. Rounds alternate so drift hits both kinds alike.

    .venv/bin/python bench/task_throughput.py [--jobs 300] [--rounds 2] [--executors 1]

Needs PostgreSQL and Kafka up (infra/stack.sh up). Uses a database of its own
(jobweaver_bench_tasks, recreated), so it never disturbs another benchmark's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DATABASE = "jobweaver_bench_tasks"


def configure() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "jobweaver_site.settings"
    os.environ.setdefault("DJANGO_DEBUG", "1")
    os.environ["JOBWEAVER_KAFKA_TOPIC_PREFIX"] = f"bench-tasks-{uuid.uuid4().hex[:8]}-"
    os.environ["DATABASE_URL"] = f"postgres://jobweaver@127.0.0.1:54329/{DATABASE}"
    os.environ["JOBWEAVER_LOG_LEVEL"] = "WARNING"
    import psycopg

    with psycopg.connect("postgresql://jobweaver@127.0.0.1:54329/postgres", autocommit=True) as db:
        db.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        db.execute(f"CREATE DATABASE {DATABASE}")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def run_round(kind: str, jobs: int) -> tuple[float, float]:
    """(submits per second, completions per second) of `jobs` jobs of `kind`."""
    from common import submit_steps
    from django.db import transaction

    from jobweaver.scheduler.models import JobExecution
    from jobweaver_site.examples.tasks import add

    started = time.monotonic()
    # One transaction for the lot, so the executor, not this loop, sets the pace; each job's
    # fast-path dispatch runs at the commit, as for any caller.
    with transaction.atomic():
        if kind == "task":
            ids = [add.enqueue(i, 1).id for i in range(jobs)]
        else:
            ids = [submit_steps([{"action": "LOG", "message": "bench"}]) for _ in range(jobs)]
    submitted = time.monotonic()
    deadline = submitted + 600
    while JobExecution.objects.filter(job_id__in=ids, status="COMPLETED").count() < jobs:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{kind}: not all {jobs} jobs completed in 600 s")
        time.sleep(0.05)
    finished = time.monotonic()
    return jobs / (submitted - started), jobs / (finished - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--executors", type=int, default=1)
    options = parser.parse_args()
    configure()
    from common import running_stack

    results: dict[str, list[tuple[float, float]]] = {"simulation": [], "task": []}
    with running_stack(executors=options.executors):
        run_round("task", 20)  # warm-up: imports, connections, consumer positions
        for _ in range(options.rounds):
            for kind in ("simulation", "task"):
                results[kind].append(run_round(kind, options.jobs))
                print(f"{kind:10s} {results[kind][-1][1]:7.1f} jobs/s", flush=True)
    print(f"\n{options.jobs} jobs x {options.rounds} rounds, {options.executors} executor(s)")
    for kind, rounds in results.items():
        submit = statistics.median(r[0] for r in rounds)
        complete = statistics.median(r[1] for r in rounds)
        print(f"{kind:10s} submit {submit:7.1f}/s   submit→all COMPLETED {complete:7.1f} jobs/s")


if __name__ == "__main__":
    main()
