"""CPU per job of the hot paths of our own code, without Celery's loop or gunicorn in the way.

    make bench-hot-paths                        (or: infra/with-stack.sh .venv/bin/python
    make bench-hot-paths ARGS="--profile"        bench/hot_paths.py --help)

`make bench` measures the whole stack, where six processes share two cores and one run can be
20% off the next: too noisy to see a change of a few percent in one function. This runs each
path in one thread of this process, one job after another, on the dev PostgreSQL (a database of
its own, dropped at the end) and Kafka, and prints its CPU and wall time per job, and the CPU of
the PostgreSQL backend serving it, medians of --rounds rounds:

- submit: `POST /api/jobs/batch` of 1,000 one-LOG jobs through Django's test client: the web
  process's code per request (middleware, token, throttle, parsing, the submit transaction, the
  response), minus gunicorn's HTTP. No executor is registered, so the submit's fast path
  dispatches nothing (the dispatch path below is that part).
- submit-one: `POST /api/jobs` of one one-LOG job, --jobs / 10 requests one after another:
  what an idle stack's submit costs the web before the dispatch (the latency's first leg).
- executor: `attempt_execute` (claim DISPATCHED → RUNNING, run one LOG step, record the
  success with its outbox event) for N jobs dispatched beforehand; what an executor thread does
  per job, minus Celery's consumer, request and tracer around it.
- relay: the outbox relay (`_relay_batch`) over N job-completed events written beforehand,
  --relay-batch at a time (20: about what a relay run finds under `make bench`): its claim,
  its produce and flush to Kafka, its update.
- dispatch: `dispatch_due_jobs` in batches of --batch (4, what the scheduler's wake-up claims
  per dispatch under `make bench`) for N due jobs, to one registered executor with room for all:
  the lock, the credits, the rules, the claim, its commit and the run_jobs records sent and
  confirmed by Kafka. Nothing runs the dispatched jobs, so the deliveries in flight grow to N
  through the round and the credits query counts them all: its PostgreSQL figure is higher
  than under flow control, where they stay within the credits.

Compare runs of this script on two commits, one after the other; --profile prints cProfile's
top functions of the last round of each path (cProfile slows Python code four- to fivefold, so
read its shares, not its times).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import time
import uuid

from common import api_token, configure, cpu_seconds, drop_database, drop_topics

DATABASE = f"jobweaver_bench_hot_{uuid.uuid4().hex[:8]}"
LOG_JOB = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "hot"}]}}
WORKER = "hot-paths:1"


def submit(n: int) -> None:
    from jobweaver.jobs import services
    from jobweaver.jobs.validation import parse_batch_request

    for start in range(0, n, 1000):
        specs = parse_batch_request({"jobs": [LOG_JOB] * min(1000, n - start)})
        services.job_submit_batch(specs=specs)  # no executor registered: nothing dispatched


def submit_round(n: int, profile) -> tuple[float, float, float]:
    from django.test import Client

    from jobweaver.scheduler import flow

    flow.executor_deregister(worker_id=WORKER)  # the submit's fast path must not dispatch
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token()}")
    sizes = [min(1000, n - start) for start in range(0, n, 1000)]
    bodies = {size: json.dumps({"jobs": [LOG_JOB] * size}) for size in set(sizes)}

    def run() -> None:
        for size in sizes:
            response = client.post("/api/jobs/batch", bodies[size], content_type="application/json")
            if response.status_code != 202:
                raise RuntimeError(f"batch POST: {response.status_code} {response.content[:300]}")

    return measured(run, n, profile)


def submit_one_round(n: int, profile) -> tuple[float, float, float]:
    from django.test import Client

    from jobweaver.scheduler import flow

    flow.executor_deregister(worker_id=WORKER)  # the submit's fast path must not dispatch
    client = Client(HTTP_AUTHORIZATION=f"Token {api_token()}")
    body = json.dumps(LOG_JOB)

    def run() -> None:
        for _ in range(n):
            response = client.post("/api/jobs", body, content_type="application/json")
            if response.status_code != 202:
                raise RuntimeError(f"POST: {response.status_code} {response.content[:300]}")

    return measured(run, n, profile)


def register(partitions: int) -> None:
    from jobweaver.scheduler import flow

    flow.executor_heartbeat(
        worker_id=WORKER,
        queues=["default"],
        slots=10**6,
        partitions=list(range(partitions)),
        joined=False,
    )


def backend_pid() -> int:
    """The PostgreSQL backend serving this thread's connection."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def measured(run, n: int, profile: cProfile.Profile | None) -> tuple[float, float, float]:
    """CPU and wall milliseconds per job of `run()`, which handles n jobs, and the CPU of the
    PostgreSQL backend serving it (its queries' side of the path; the outbox relay's own
    connection is not counted)."""
    backend = backend_pid()
    wall, cpu, pg = time.perf_counter(), time.process_time(), cpu_seconds(backend)
    if profile is not None:
        profile.enable()
    run()
    if profile is not None:
        profile.disable()
    return (
        (time.process_time() - cpu) * 1000 / n,
        (time.perf_counter() - wall) * 1000 / n,
        (cpu_seconds(backend) - pg) * 1000 / n,
    )


def executor_round(n: int, profile) -> tuple[float, float]:
    from django.db import transaction

    from jobweaver.engine.claim import executions_claim
    from jobweaver.executor.runner import attempt_execute

    submit(n)
    claims = []
    while len(claims) < n:
        with transaction.atomic():
            batch = executions_claim(limit=50, workers=[WORKER] * 50)
        if not batch:
            raise RuntimeError(f"only {len(claims)} of {n} jobs could be claimed")
        claims.extend(batch)

    def run() -> None:
        for claim in claims:
            if attempt_execute(job_id=claim.job_id, event_id=claim.event_id) != "SUCCESS":
                raise RuntimeError(f"job {claim.job_id} did not succeed")

    return measured(run, n, profile)


def relay_round(n: int, batch: int, profile) -> tuple[float, float, float]:
    from django.db import transaction

    from jobweaver.engine.store.events import events_insert_many
    from jobweaver.outbox import services as outbox

    outbox.outbox_relay_pending()  # what earlier paths left, so each batch below is full
    payload = {"jobId": str(uuid.uuid4()), "status": "COMPLETED", "attempt": 1, "durationMs": 0}
    rows = [(str(uuid.uuid4()), payload, uuid.uuid4().hex) for _ in range(n)]
    with transaction.atomic():
        events_insert_many(topic="job-completed", rows=rows)
    sized, outbox.RELAY_BATCH_SIZE = outbox.RELAY_BATCH_SIZE, batch

    def run() -> None:
        relayed = 0
        while relayed < n:
            confirmed, claimed = outbox._relay_batch()
            if confirmed != claimed or not claimed:
                raise RuntimeError(f"relayed {relayed} of {n}, then {confirmed} of {claimed}")
            relayed += confirmed

    try:
        return measured(run, n, profile)
    finally:
        outbox.RELAY_BATCH_SIZE = sized


def dispatch_round(n: int, batch: int, profile) -> tuple[float, float]:
    from django.conf import settings

    from jobweaver.scheduler import flow
    from jobweaver.scheduler.dispatch import dispatch_due_jobs

    flow.executor_deregister(worker_id=WORKER)  # the submit's fast path must not dispatch
    submit(n)
    register(settings.JOBWEAVER_RUN_JOB_PARTITIONS)
    sent: list = []

    def run() -> None:
        sent.extend(dispatch_due_jobs(batch_size=batch))  # batch after batch until none is due

    result = measured(run, n, profile)
    flow.executor_deregister(worker_id=WORKER)
    if len(sent) != n:
        raise RuntimeError(f"dispatched {len(sent)} of {n} jobs")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", "-n", type=int, default=2000, help="jobs per round (2000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per path (3)")
    parser.add_argument("--batch", type=int, default=4, help="jobs per dispatch (4)")
    parser.add_argument("--relay-batch", type=int, default=20, help="events per relay batch (20)")
    parser.add_argument("--profile", action="store_true", help="cProfile the last round")
    parser.add_argument(
        "--only",
        default="submit,executor,dispatch",
        help="paths, comma-separated (default submit,executor,dispatch; also submit-one, relay)",
    )
    args = parser.parse_args()
    # The executor logs at INFO as deployed: its log lines are part of its cost per job.
    configure(
        database=DATABASE,
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="bench-" + DATABASE,
        # The test client speaks plain HTTP; no submission limit is what is measured.
        JOBWEAVER_SECURE_SSL_REDIRECT="0",
        JOBWEAVER_SUBMIT_THROTTLE_RATE="100000000",
        JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER="100000000",
    )
    import logging

    from jobweaver.scheduler.dispatch import warm_up_publisher
    from tests.stack import LOG_DIR

    # Into a file, as a deployed executor's lines go to a file or a pipe, not a terminal.
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log = open(LOG_DIR / f"{DATABASE}.log", "a")  # noqa: SIM115 - open for the whole run
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(log)
    logging.getLogger().setLevel(logging.INFO)

    warm_up_publisher()
    try:
        paths = {
            "submit": lambda profile: submit_round(args.jobs, profile),
            "submit-one": lambda profile: submit_one_round(args.jobs // 10, profile),
            "executor": lambda profile: executor_round(args.jobs, profile),
            "dispatch": lambda profile: dispatch_round(args.jobs, args.batch, profile),
            "relay": lambda profile: relay_round(args.jobs, args.relay_batch, profile),
        }
        chosen = args.only.split(",")
        if unknown := set(chosen) - set(paths):
            parser.error(f"--only: unknown paths {sorted(unknown)}; known: {sorted(paths)}")
        for name, run in ((name, paths[name]) for name in chosen):
            run(None)  # warm-up: connections, prepared statements, the producer
            results = []
            for number in range(args.rounds):
                last = number == args.rounds - 1
                profile = cProfile.Profile(time.process_time) if args.profile and last else None
                results.append(run(profile))
            cpu = statistics.median(r[0] for r in results)
            wall = statistics.median(r[1] for r in results)
            pg = statistics.median(r[2] for r in results)
            print(
                f"{name:<8} CPU {cpu:.3f} ms/job, wall {wall:.3f} ms/job, PostgreSQL backend "
                f"CPU {pg:.3f} ms/job (medians of {args.rounds} rounds of {args.jobs} jobs; "
                "CPU per round " + ", ".join(f"{r[0]:.3f}" for r in results) + ")",
                flush=True,
            )
            if profile is not None:
                stats = pstats.Stats(profile)
                stats.sort_stats("tottime").print_stats(20)
                stats.sort_stats("cumulative").print_stats(r"apps/|logging/__init__|tracing", 30)
    finally:
        from django.db import connections

        drop_topics(os.environ["JOBWEAVER_KAFKA_TOPIC_PREFIX"])
        connections.close_all()
        drop_database(DATABASE)


if __name__ == "__main__":
    main()
