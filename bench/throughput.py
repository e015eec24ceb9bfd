"""End-to-end throughput: JobWeaver's full durable path against stock Celery (on Kafka and on
Redis), procrastinate and pgqueuer, same N, same PostgreSQL, one run (issues 9 and 34), with
every system's CPU per job by process.

    make bench ARGS="--jobs 5000 --executors 1 --threads 4"
    (or: infra/with-stack.sh .venv/bin/python bench/throughput.py --help)

1. JobWeaver: a throwaway stack (bench/common.py: a database of this run's own, its topic prefix;
   scheduler, beat, E executors of T threads) and a gunicorn web process on a free port. N jobs
   of one LOG step go through `POST /api/jobs/batch` over HTTP, --per-request per request from
   --clients client threads; waits until all are COMPLETED. Prints jobs/s (submit start → last
   finished_at) and submit→RUNNING / submit→COMPLETED p50/p95/p99 from database times (job
   created_at, execution started_at / finished_at). Before that, one job through the fresh web
   process: its submit→RUNNING is "the first job after a start".
2. Stock Celery on Kafka ("celery"): the same N no-op tasks (bench/transport_app.py) on kombu's
   stock `confluentkafka` transport, one worker process of the threads pool with as many
   threads as one executor, otherwise at Celery's defaults (acks early, prefetch multiplier 4;
   --celery-acks-late, --celery-prefetch ask otherwise); each task writes a completion row
   (done_at) in PostgreSQL. Timed from publish start to the last done_at.
3. Stock Celery on Redis ("celery-redis"): the same app, worker and defaults on Debian's
   redis-server (installed by `infra/stack.sh bench-tools`, started here on a free port in a
   throwaway directory at its built-in defaults, stopped at the end); worker and publisher run
   from the bench venv, which has the redis client.
4. procrastinate: the same N no-op jobs (bench/procrastinate_app.py) in a database of its own
   (procrastinate_bench_<run>, its schema applied), one `batch_defer`, one worker process of
   the same concurrency. Timed from batch_defer start to the last `succeeded` event.
5. pgqueuer: the same N no-op jobs (bench/pgqueuer_app.py) in a database of its own
   (pgqueuer_bench_<run>, `pgq install`), one `enqueue` of N, one worker process at pgqueuer's
   defaults (unlimited concurrency) dequeuing --pgqueuer-batch-size at a time. Timed from the
   enqueue's start to the last job logged 'successful' (pgqueuer_log).

Each compared system enqueues from a process of its own (bench/enqueuer.py), started and
connected before the clock starts, so its CPU is the system's, like our web process's. Each
side gets a warm-up before its clock starts (consumer group formed, connections open), and
before the first round --warm-up-jobs jobs run untimed through our stack, so that no round
measures a broker or a database server that has just started (`warm_up`).
Prints the last round's table with the load average at each side's start and end, then, over
the rounds' medians, every side's jobs/s, whole-stack CPU per job and each process's share, and
the ratios of ours to each. Times are wall-clock on a shared machine: quote them with the load
they ran under; the PostgreSQL and Kafka servers are shared, so their CPU includes whatever
else ran on them meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from common import (
    ROOT,
    Bar,
    CpuMeter,
    api_token,
    configure,
    drop_database,
    drop_topics,
    running_stack,
    running_web,
)

BENCH_VENV = ROOT / ".cache" / "bench-venv"
PG = "postgresql://jobweaver@127.0.0.1:54329"
BOOTSTRAP = "127.0.0.1:19092"
# Databases of this run, on the same PostgreSQL server, dropped at its end: names of their own,
# so a benchmark running beside this one (bench/common.py's jobweaver_bench) cannot drop them.
RUN_ID = uuid.uuid4().hex[:8]
OURS_DB = f"jobweaver_bench_{RUN_ID}"
CELERY_DB = f"jobweaver_bench_celery_{RUN_ID}"
PROCRASTINATE_DB = f"procrastinate_bench_{RUN_ID}"
PGQUEUER_DB = f"pgqueuer_bench_{RUN_ID}"
LOG_STEP = [{"action": "LOG", "message": "bench"}]
POLL_SECONDS = 0.25
# "ours-processes": the same as "ours" with the executors' process pool (--pool processes).
SIDES = ("ours", "ours-processes", "celery", "celery-redis", "procrastinate", "pgqueuer")


def pinned(package: str) -> str:
    """The version bench/requirements-bench-venv.txt pins for `package`, for the report."""
    for line in (ROOT / "bench" / "requirements-bench-venv.txt").read_text().splitlines():
        name, _, version = line.partition("==")
        if name.split("[")[0].strip() == package:
            return version.strip()
    return "?"


SIDE_NAMES = {
    "ours": "JobWeaver: batch API over HTTP → COMPLETED",
    "ours-processes": "JobWeaver, the same, executors --pool processes",
    "celery": "stock Celery on Kafka (kombu confluentkafka)",
    "celery-redis": "stock Celery on Redis (Debian's redis-server)",
    "procrastinate": f"procrastinate {pinned('procrastinate')}, batch_defer → succeeded",
    "pgqueuer": f"pgqueuer {pinned('pgqueuer')}, enqueue → successful",
}
# The columns of the CPU table: a system's processes by role (CpuMeter's names), in the order
# a job goes through them; a system has some of them.
ROLE_COLUMNS = (
    ("web", "web"),
    ("publisher", "publisher"),
    ("scheduler", "scheduler"),
    ("beat", "beat"),
    ("executor", "executor(s)"),
    ("worker", "worker(s)"),
    ("postgres", "PostgreSQL"),
    ("kafka", "Kafka"),
    ("redis", "Redis"),
)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", "-n", type=int, default=5000, help="N (default 5000)")
    parser.add_argument("--executors", type=int, default=1, help="executor processes (default 1)")
    parser.add_argument(
        "--threads",
        type=int,
        default=4,
        help="threads per executor = JOBWEAVER_EXECUTOR_CONCURRENCY (default 4)",
    )
    parser.add_argument(
        "--prefetch",
        type=int,
        default=None,
        help="JOBWEAVER_DISPATCH_PREFETCH of our stack: deliveries per executor thread "
        "(default: the setting's own, 2)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes of stock Celery and of procrastinate (default 1; pgqueuer: 1)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="threads of a Celery worker / concurrency of a procrastinate worker "
        "(default: --threads, the same as one executor)",
    )
    parser.add_argument(
        "--celery-prefetch",
        type=int,
        default=None,
        help="worker_prefetch_multiplier of stock Celery: messages it reserves per thread "
        "(default: Celery's own, 4)",
    )
    parser.add_argument(
        "--celery-acks-late",
        action="store_true",
        help="task_acks_late for stock Celery (default: Celery's own, acks early)",
    )
    parser.add_argument(
        "--pgqueuer-batch-size",
        type=int,
        default=10,
        help="jobs pgqueuer's worker dequeues at a time (default 10, pgqueuer's own)",
    )
    parser.add_argument("--clients", type=int, default=4, help="HTTP client threads (default 4)")
    parser.add_argument(
        "--per-request", type=int, default=1000, help="jobs per batch request (default 1000)"
    )
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn workers (default 2)")
    parser.add_argument(
        "--web-threads", type=int, default=4, help="gunicorn threads per worker (default 4)"
    )
    parser.add_argument(
        "--only",
        default=",".join(SIDES),
        help=f"comma-separated sides to run (default {','.join(SIDES)})",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="run every side this many times, in turn, and print the medians (default 3)",
    )
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        help="jobs run through each round's stack of ours, then ANALYZE, before its clock "
        "starts: a running system's tables, not a new database's (default 0)",
    )
    parser.add_argument(
        "--warm-up-jobs",
        type=int,
        default=25_000,
        help="jobs of an untimed pass through our stack before the first round, to warm the "
        "shared PostgreSQL and Kafka servers; its figures are printed, not counted "
        "(default 25000; 0: none)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="py-spy the first executor while ours runs; summary printed, raw stacks kept",
    )
    parser.add_argument(
        "--profile-cpu",
        action="store_true",
        help="as --profile, but only samples of threads on the CPU (no --idle), of every "
        "thread: where the executor's CPU goes, not its threads' wall time",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="DJANGO_DEBUG=1 in the stack (default off, as deployed)",
    )
    args = parser.parse_args(argv)
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    if unknown := set(args.only) - set(SIDES):
        parser.error(f"unknown side(s) {sorted(unknown)}")
    if args.concurrency is None:
        args.concurrency = args.threads
    if args.prefetch is not None and args.prefetch < 1:
        parser.error("--prefetch must be at least 1")
    if args.celery_prefetch is not None and args.celery_prefetch < 1:
        parser.error("--celery-prefetch must be at least 1")
    if args.pgqueuer_batch_size < 1:
        parser.error("--pgqueuer-batch-size must be at least 1")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.warm_up_jobs < 0:
        parser.error("--warm-up-jobs must be 0 or more")
    if not 1 <= args.per_request <= 1000:
        parser.error("--per-request must be 1..1000 (the batch API's limit)")
    return args


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def recreate_database(name: str) -> str:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return f"{PG}/{name}"


def wait_progress(bar, task, n: int, count, *, stall_seconds: float = 120, info=None) -> int:
    """Poll count() until n or no progress for stall_seconds; returns the last count."""
    last, last_change = -1, time.monotonic()
    while True:
        done = count()
        bar.update(task, done, info() if info else "")
        if done >= n:
            return done
        if done != last:
            last, last_change = done, time.monotonic()
        elif time.monotonic() - last_change > stall_seconds:
            bar.note(f"stalled at {done}/{n} for {stall_seconds:g} s")
            return done
        time.sleep(POLL_SECONDS)


def stop_process(process: subprocess.Popen, timeout: float = 30) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def log_file(name: str):
    from tests.stack import LOG_DIR

    LOG_DIR.mkdir(parents=True, exist_ok=True)
    return open(LOG_DIR / name, "ab")


class Enqueuer:
    """A compared system's enqueuing process (bench/enqueuer.py): started and connected before
    the clock, asked for runs of jobs, its CPU read while it lives."""

    def __init__(self, argv: list[str], env: dict[str, str], log_name: str):
        with log_file(log_name) as log:
            self.process = subprocess.Popen(
                argv,
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        if self._line() != "ready":
            raise RuntimeError(f"the enqueuer did not start; see .devdata/test-logs/{log_name}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def _line(self) -> str:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the enqueuer exited ({self.process.wait(10)})")
        return line.strip()

    def enqueue(self, run_id: str, count: int) -> tuple[float, float]:
        """`count` jobs; returns the epoch seconds the enqueuing started and ended at."""
        self.process.stdin.write(f"{run_id} {count}\n")
        self.process.stdin.flush()
        started, ended = self._line().split()
        return float(started), float(ended)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            stop_process(self.process)


def compared_env(**extra: str) -> dict[str, str]:
    """The environment of a compared system's processes: this one's without Django's settings
    module, which made Celery apply its Django fix-up (django.setup(), our logging, connection
    checks around every task) to an app that is not Django."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def bench_python() -> Path:
    python = BENCH_VENV / "bin" / "python"
    if not python.exists():
        raise SystemExit(
            f"{python} missing: make bench installs bench/requirements-bench-venv.txt there"
        )
    return python


@contextlib.contextmanager
def running_redis():
    """Debian's redis-server at its built-in defaults (no config file) on a free port of
    127.0.0.1, in a throwaway directory; yields (port, Popen) once it answers PING."""
    from tests.stack import free_port

    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit(
            "redis-server missing: make bench installs it (infra/stack.sh bench-tools)"
        )
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as directory:
        with log_file(f"{os.environ['JOBWEAVER_KAFKA_TOPIC_PREFIX']}redis.log") as log:
            process = subprocess.Popen(
                [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory],
                cwd=directory,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 30
            while not _redis_answers(port):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start; see .devdata/test-logs/")
                time.sleep(0.05)
            yield port, process
        finally:
            stop_process(process)


def _redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


# --- JobWeaver --------------------------------------------------------------------------------


class Client:
    """POST /api/jobs/batch over HTTP, one requests.Session per client thread."""

    def __init__(self, base: str, token: str):
        self.url = f"{base}/api/jobs/batch"
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.local = threading.local()

    def post(self, count: int) -> list[str]:
        return self.post_jobs([{"jobType": "SIMULATION", "payload": {"steps": LOG_STEP}}] * count)

    def post_jobs(self, jobs: list[dict]) -> list[str]:
        import requests

        session = getattr(self.local, "session", None)
        if session is None:
            session = self.local.session = requests.Session()
        body = json.dumps({"jobs": jobs})
        response = session.post(
            self.url, data=body, headers=self.headers, timeout=120, allow_redirects=False
        )
        if response.status_code != 202:
            raise RuntimeError(f"batch POST: {response.status_code} {response.text[:300]}")
        return [item["jobId"] for item in response.json()["jobs"]]


def run_history(client: Client, n: int) -> None:
    """--history: n jobs through the round's stack before its clock starts, then ANALYZE, as
    autovacuum would: the round then measures tables that hold history, under statistics that
    saw none of the round's backlog, as a running system between bursts does. Without it a
    round measures a new database's first seconds (bench/NOTES.md has both)."""
    from django.db import connection

    ids = [j for count in [1000] * (n // 1000) + [n % 1000] if count for j in client.post(count)]
    wait_completed(ids, timeout=max(60, n / 50))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def execution_counts(baseline: dict[str, int] | None = None) -> dict[str, int]:
    """Executions by status (one sequential scan, no join: cheap enough to poll), minus
    `baseline` (the counts before the measured jobs were submitted)."""
    from django.db.models import Count

    from jobweaver.scheduler.models import JobExecution

    rows = dict(JobExecution.objects.values_list("status").annotate(n=Count("id")).order_by())
    return {k: v - (baseline or {}).get(k, 0) for k, v in rows.items()}


def wait_completed(job_ids: list[str], timeout: float = 60) -> None:
    from jobweaver.scheduler.models import JobExecution

    deadline = time.monotonic() + timeout
    done = JobExecution.objects.filter(job_id__in=job_ids, status="COMPLETED")
    while done.count() < len(job_ids):
        if time.monotonic() > deadline:
            raise TimeoutError(f"warm-up jobs not COMPLETED in {timeout} s")
        time.sleep(0.01)


def latency_stats(since: datetime) -> dict:
    """Percentiles (ms) and the last finished_at of the jobs created since `since`."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT count(*), max(e.finished_at),
                   percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP
                       (ORDER BY extract(epoch FROM e.started_at - j.created_at)),
                   percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP
                       (ORDER BY extract(epoch FROM e.finished_at - j.created_at)),
                   max(j.created_at),
                   sum(extract(epoch FROM e.finished_at - e.started_at)),
                   extract(epoch FROM max(e.finished_at) - min(e.started_at)),
                   avg(extract(epoch FROM e.started_at - e.dispatched_at)),
                   percentile_cont(ARRAY[0.05, 0.5, 0.95]) WITHIN GROUP
                       (ORDER BY extract(epoch FROM e.started_at - e.dispatched_at)),
                   percentile_cont(ARRAY[0.05, 0.5, 0.95]) WITHIN GROUP
                       (ORDER BY extract(epoch FROM e.finished_at - e.started_at))
            FROM jobweaver_jobs_job j JOIN jobweaver_scheduler_jobexecution e ON e.job_id = j.id
            WHERE j.created_at >= %s AND e.status = 'COMPLETED'
            """,
            [since],
        )
        (completed, last, running, done, last_created, busy, span, waited, to_start, attempt) = (
            cursor.fetchone()
        )
    return {
        "completed": completed,
        "last": last,
        "last_created": last_created,
        "running": [x * 1000 for x in running or []],
        "completed_ms": [x * 1000 for x in done or []],
        # Attempts in progress on average (started_at → finished_at summed over the span), and
        # how long a delivery waited in the executor for a free thread.
        "busy_slots": float(busy) / float(span) if busy and span else 0.0,
        "dispatched_to_started_ms": float(waited or 0) * 1000,
        # A credit's legs on the database clock, p5 / p50 / p95: the claim to the attempt's
        # start (transit, the executor's line, the start's write) and the start to the ending's
        # write (the work, and the ending's wait for its group commit).
        "to_start_ms": [x * 1000 for x in to_start or []],
        "attempt_ms": [x * 1000 for x in attempt or []],
    }


def db_activity() -> dict[str, int]:
    """Cumulative transactions and row operations of the bench database (pg_stat_database)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT sessions, xact_commit + xact_rollback, tup_inserted, tup_updated, tup_deleted, "
            "tup_returned, tup_fetched FROM pg_stat_database WHERE datname = current_database()"
        )
        row = cursor.fetchone()
        cursor.execute(
            "SELECT 'index ' || indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes "
            "UNION ALL SELECT 'seq scan ' || relname, seq_scan, seq_tup_read "
            "FROM pg_stat_user_tables"
        )
        scans = {name: (n, rows) for name, n, rows in cursor.fetchall()}
    keys = ("sessions", "transactions", "inserted", "updated", "deleted", "returned", "fetched")
    return {**dict(zip(keys, row, strict=True)), "scans": scans}


def start_profiler(pid: int, out: Path, *, idle: bool = True) -> subprocess.Popen:
    return subprocess.Popen(
        [
            str(BENCH_VENV / "bin" / "py-spy"),
            "record",
            "--pid",
            str(pid),
            "--rate",
            "200",
            *(["--idle"] if idle else []),
            "--threads",
            "--nonblocking",
            "--format",
            "raw",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def fresh_database() -> None:
    """A later round starts on a new, migrated database, as the first did. Emptying the
    tables instead (TRUNCATE) left statistics that said "empty": the new stack's prepared
    statements were planned for empty tables, and some kept a sequential scan of the attempts
    for the whole round."""
    from django.core.management import call_command
    from django.db import connections

    from jobweaver.jobs.models import Job

    if not Job.objects.exists():
        return  # the first round: configure() made it
    connections.close_all()
    recreate_database(OURS_DB)
    call_command("migrate", verbosity=0)


def run_ours(args, bar: Bar, *, pool: str = "threads") -> dict:
    os.environ["JOBWEAVER_EXECUTOR_POOL"] = pool  # read by the executors the stack starts
    try:
        return _run_ours(args, bar)
    finally:
        os.environ.pop("JOBWEAVER_EXECUTOR_POOL")


def _run_ours(args, bar: Bar) -> dict:
    from django.conf import settings

    from jobweaver.scheduler.flow import live_executors

    fresh_database()
    token = api_token()
    n = args.jobs
    web_env = {
        # The bench's user submits far more than the defaults allow (ARCHITECTURE §10).
        "JOBWEAVER_SUBMIT_THROTTLE_RATE": str(max(1000, 10 * n)),
        "JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER": str(max(10_000, 2 * n)),
        # Plain HTTP on 127.0.0.1, as behind a TLS-terminating proxy.
        "JOBWEAVER_SECURE_SSL_REDIRECT": "0",
    }
    result: dict = {"load_start": load()}
    with (
        running_stack(executors=args.executors) as processes,
        running_web(workers=args.web_workers, threads=args.web_threads, **web_env) as (base, web),
    ):
        deadline = time.monotonic() + 90
        while len([r for r in live_executors() if r.partitions]) < args.executors:
            if time.monotonic() > deadline:
                raise TimeoutError("not every executor registered")
            time.sleep(0.2)
        client = Client(base, token)
        # The first job through the fresh web process (its producer warmed at worker start).
        first_submitted = datetime.now(UTC)
        first = client.post(1)
        wait_completed(first)
        from jobweaver.scheduler.models import JobExecution

        execution = JobExecution.objects.select_related("job").get(job_id=first[0])
        result["first_job_ms"] = (execution.started_at - first_submitted).total_seconds() * 1000
        result["first_job_parts"] = [
            (execution.job.created_at - first_submitted).total_seconds() * 1000,
            (execution.dispatched_at - execution.job.created_at).total_seconds() * 1000,
            (execution.started_at - execution.dispatched_at).total_seconds() * 1000,
        ]
        # Warm every gunicorn thread's connection and every client session, like the other sides.
        with ThreadPoolExecutor(args.clients) as pool:
            warm = [
                j
                for ids in pool.map(client.post, [1] * (args.web_workers * args.web_threads))
                for j in ids
            ]
        wait_completed(warm)
        if args.history:
            run_history(client, args.history)
        time.sleep(1)  # let the warm-up's outbox events and acks settle

        executor_pids = [p.pid for p in processes if p.role == "executor"]
        profiler = None
        if args.profile or args.profile_cpu:
            result["profile_cpu"] = args.profile_cpu
            result["profile_path"] = (
                ROOT
                / ".devdata"
                / "bench-logs"
                / f"profile-executor-{settings.JOBWEAVER_KAFKA_TOPIC_PREFIX}txt"
            )
            result["profile_path"].parent.mkdir(parents=True, exist_ok=True)
            profiler = start_profiler(
                executor_pids[0], result["profile_path"], idle=not args.profile_cpu
            )
            time.sleep(1)
        before = db_activity()
        baseline = execution_counts()
        # With descendants: a process-pool executor's forkserver and children are its CPU too.
        meter = CpuMeter(
            {
                **{f"{p.role}:{i}": (p.pid, True) for i, p in enumerate(processes)},
                "web": (web.pid, True),
            }
        )
        meter.start()
        result["load_start"] = load()
        task = bar.add("jobweaver", n)
        chunks = [min(args.per_request, n - i) for i in range(0, n, args.per_request)]
        submitted_at = datetime.now(UTC)
        t0 = time.monotonic()
        request_ms: list[float] = []

        def post(count: int) -> list[str]:
            started = time.monotonic()
            ids = client.post(count)
            request_ms.append((time.monotonic() - started) * 1000)
            return ids

        pool = ThreadPoolExecutor(args.clients)
        futures = [pool.submit(post, c) for c in chunks]
        submit_done: dict = {}

        def watch_submit() -> None:
            for f in futures:
                f.result()
            submit_done["at"] = time.monotonic() - t0

        watcher = threading.Thread(target=watch_submit, daemon=True)
        watcher.start()

        # One count of the executions per poll, shared by the progress line: the count reads
        # the whole table (the history and the warm-up included), and the bench's polling is
        # charged to PostgreSQL's CPU with ours.
        polled: dict[str, int] = {}

        def info() -> str:
            counts = polled
            sub = f"submitted in {submit_done['at']:.1f} s" if submit_done else "submitting"
            return (
                f"{sub}; pending {counts.get('PENDING', 0)} dispatched "
                f"{counts.get('DISPATCHED', 0)} running {counts.get('RUNNING', 0)}"
            )

        def done() -> int:
            polled.clear()
            polled.update(execution_counts(baseline))
            return polled.get("COMPLETED", 0)

        wait_progress(bar, task, n, done, info=info)
        # Read at once, like the other sides': the waits below would add idle seconds.
        result["cpu"] = meter.stop()
        for f in futures:
            f.result()  # raise a client error here
        pool.shutdown()
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            profiler.wait(60)
        time.sleep(2)  # pg_stat_database is flushed by each backend within about a second
        after = db_activity()
        result["load_end"] = load()
        result["rss_executor_mib"] = [_rss(pid) for pid in executor_pids]
        result["rss_web_mib"] = _rss(web.pid, children=True)
    stats = latency_stats(submitted_at)
    result.update(stats)
    result["n"] = n
    result["submit_s"] = submit_done.get("at")
    result["request_ms"] = sorted(request_ms)
    result["elapsed"] = (
        (stats["last"] - submitted_at).total_seconds() if stats["last"] else math.inf
    )
    result["per_job"] = {k: (after[k] - before[k]) / n for k in before if k != "scans"}
    scans = {
        name: (
            count - before["scans"].get(name, (0, 0))[0],
            rows - before["scans"].get(name, (0, 0))[1],
        )
        for name, (count, rows) in after["scans"].items()
    }
    result["scans"] = sorted(scans.items(), key=lambda kv: -kv[1][1])[:5]
    return result


def _rss(pid: int, children: bool = False) -> float:
    from common import rss_mib

    return rss_mib(pid, with_children=children)


# --- stock Celery, on kombu's confluentkafka transport and on Redis ------------------------------


def celery_prefetch(args) -> int:
    """Messages a stock Celery worker reserves per thread: Celery's own default
    (worker_prefetch_multiplier 4) unless --celery-prefetch. Until issue 34 this bench gave it
    our executor's window (JOBWEAVER_DISPATCH_PREFETCH, 2) instead (bench/NOTES.md)."""
    from celery.app.defaults import DEFAULTS

    return args.celery_prefetch or DEFAULTS["worker_prefetch_multiplier"]


def celery_acks_late(args) -> bool:
    from celery.app.defaults import DEFAULTS

    return args.celery_acks_late or DEFAULTS["task_acks_late"]


def run_celery(args, bar: Bar) -> dict:
    from confluent_kafka.admin import AdminClient
    from transport_bench import STOCK_OPTIONS

    # A queue (topic) per round: the last round's is deleted at its end, and a producer may
    # still know it by its old metadata ("Unknown topic") when the next round starts.
    queue = f"{os.environ['JOBWEAVER_KAFKA_TOPIC_PREFIX']}celery-noop-{uuid.uuid4().hex[:6]}"
    try:
        return _run_celery(
            args,
            bar,
            name="stock celery",
            python=Path(sys.executable),
            broker_url=f"confluentkafka://{BOOTSTRAP}",
            options=STOCK_OPTIONS,
            queue=queue,
            servers={"kafka": None},
        )
    finally:
        admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
        for future in admin.delete_topics([queue], operation_timeout=10).values():
            with contextlib.suppress(Exception):  # cleanup only
                future.result(timeout=15)


def run_celery_redis(args, bar: Bar) -> dict:
    queue = f"{os.environ['JOBWEAVER_KAFKA_TOPIC_PREFIX']}celery-redis-noop"
    with running_redis() as (port, redis):
        return _run_celery(
            args,
            bar,
            name="celery on redis",
            python=bench_python(),
            broker_url=f"redis://127.0.0.1:{port}/0",
            options={},
            queue=queue,
            # With its children: a background save (at its default save points) is a fork.
            servers={"redis": (redis.pid, True)},
        )


def _run_celery(
    args,
    bar: Bar,
    *,
    name: str,
    python: Path,
    broker_url: str,
    options: dict,
    queue: str,
    servers: dict,
) -> dict:
    """Stock Celery on one broker: `args.workers` worker processes and a publisher process run
    by `python`, bench/transport_app.py at Celery's defaults (BENCH_CELERY_DEFAULTS) but for the
    threads pool and the options given. `servers`: the broker's processes to meter, a name of
    CpuMeter's shared servers (None) or (pid, with children)."""
    import psycopg

    dsn = recreate_database(CELERY_DB)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE bench_runs (run_id text, key int, pid int, "
            "done_at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (run_id, key))"
        )
        conn.execute("CREATE TABLE bench_duplicates (run_id text, key int, pid int)")
    env = compared_env(
        BENCH_BROKER_URL=broker_url,
        BENCH_TRANSPORT_OPTIONS=json.dumps(options),
        BENCH_QUEUE=queue,
        BENCH_DSN=dsn,
        BENCH_CELERY_DEFAULTS="1",
    )
    if celery_acks_late(args):
        env["BENCH_CELERY_ACKS_LATE"] = "1"
    workers = []
    for i in range(args.workers):
        with log_file(f"{queue}-{i}.log") as log:
            workers.append(
                subprocess.Popen(
                    [
                        str(python),
                        *("-m", "celery", "-A", "bench.transport_app", "worker"),
                        *("-Q", queue, "-P", "threads", "-c", str(args.concurrency)),
                        *("--prefetch-multiplier", str(celery_prefetch(args))),
                        *("-n", f"bench-celery{i}@%h", "-l", "WARNING"),
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

    def count(run_id: str) -> int:
        with psycopg.connect(dsn) as conn:
            return conn.execute(
                "SELECT count(*) FROM bench_runs WHERE run_id = %s", (run_id,)
            ).fetchone()[0]

    result: dict = {"n": args.jobs}
    publisher = None
    try:
        publisher = Enqueuer(
            [str(python), "-m", "bench.transport_app", "enqueue"], env, f"{queue}-publisher.log"
        )
        warm = bar.add("celery warm-up", 8)
        publisher.enqueue("warmup", 8)
        if wait_progress(bar, warm, 8, lambda: count("warmup"), stall_seconds=90) < 8:
            raise RuntimeError(f"{name} warm-up failed; see .devdata/test-logs/{queue}-*")
        result["load_start"] = load()
        meter = CpuMeter(
            {
                **{f"worker:{i}": (w.pid, False) for i, w in enumerate(workers)},
                "publisher": (publisher.pid, False),
                **{role: pid for role, pid in servers.items() if pid is not None},
            },
            servers=("postgres", *(role for role, pid in servers.items() if pid is None)),
        )
        meter.start()
        task = bar.add(name, args.jobs)
        run_id = uuid.uuid4().hex[:8]
        published: dict = {}

        def publish_all() -> None:
            published["at"] = publisher.enqueue(run_id, args.jobs)

        thread = threading.Thread(target=publish_all, daemon=True)
        thread.start()
        ran = wait_progress(
            bar,
            task,
            args.jobs,
            lambda: count(run_id),
            info=lambda: (
                f"published in {published['at'][1] - published['at'][0]:.1f} s"
                if published
                else "publishing"
            ),
        )
        thread.join()
        result["cpu"] = meter.stop()
        result["load_end"] = load()
        with psycopg.connect(dsn) as conn:
            last, dups = conn.execute(
                "SELECT max(done_at), (SELECT count(*) FROM bench_duplicates WHERE run_id = %s) "
                "FROM bench_runs WHERE run_id = %s",
                (run_id, run_id),
            ).fetchone()
        started, ended = published["at"]
        result.update(
            completed=ran,
            duplicates=dups,
            publish_s=ended - started,
            elapsed=last.timestamp() - started,
        )
    finally:
        if publisher is not None:
            publisher.close()
        for worker in workers:
            stop_process(worker)
    return result


# --- procrastinate ------------------------------------------------------------------------------


def run_procrastinate(args, bar: Bar) -> dict:
    import psycopg

    python = bench_python()
    dsn = recreate_database(PROCRASTINATE_DB)
    env = compared_env(BENCH_PROCRASTINATE_DSN=dsn)
    cli = [str(BENCH_VENV / "bin" / "procrastinate"), "--app=bench.procrastinate_app.app"]
    subprocess.run([*cli, "schema", "--apply"], cwd=ROOT, env=env, check=True, capture_output=True)
    prefix = os.environ["JOBWEAVER_KAFKA_TOPIC_PREFIX"]
    workers = []
    for i in range(args.workers):
        with log_file(f"{prefix}procrastinate-{i}.log") as log:
            workers.append(
                subprocess.Popen(
                    [
                        *cli,
                        "--log-level=warning",
                        "worker",
                        f"--name=bench-{i}",
                        f"--concurrency={args.concurrency}",
                        "--queues=bench",
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

    def succeeded() -> int:
        with psycopg.connect(dsn) as conn:
            return conn.execute(
                "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
            ).fetchone()[0]

    result: dict = {"n": args.jobs}
    deferrer = None
    try:
        deferrer = Enqueuer(
            [str(python), "-m", "bench.procrastinate_app", "enqueue"],
            env,
            f"{prefix}procrastinate-defer.log",
        )
        warm_n = 2 * args.concurrency * args.workers
        warm = bar.add("procr. warm-up", warm_n)
        deferrer.enqueue("warmup", warm_n)
        if wait_progress(bar, warm, warm_n, succeeded, stall_seconds=60) < warm_n:
            raise RuntimeError("procrastinate warm-up failed")
        result["load_start"] = load()
        meter = CpuMeter(
            {
                **{f"worker:{i}": (w.pid, False) for i, w in enumerate(workers)},
                "publisher": (deferrer.pid, False),
            },
            servers=("postgres",),
        )
        meter.start()
        task = bar.add("procrastinate", args.jobs)
        deferred: dict = {}

        def defer_all() -> None:
            deferred["at"] = deferrer.enqueue("run", args.jobs)

        thread = threading.Thread(target=defer_all, daemon=True)
        thread.start()
        done = wait_progress(bar, task, args.jobs, lambda: max(0, succeeded() - warm_n))
        thread.join()
        result["cpu"] = meter.stop()
        result["load_end"] = load()
        with psycopg.connect(dsn) as conn:
            last, deferred_last = conn.execute(
                "SELECT max(at) FILTER (WHERE type = 'succeeded'), "
                "max(at) FILTER (WHERE type = 'deferred') FROM procrastinate_events"
            ).fetchone()
        started = deferred["at"][0]
        result.update(
            completed=done,
            publish_s=deferred_last.timestamp() - started,
            elapsed=last.timestamp() - started,
        )
    finally:
        if deferrer is not None:
            deferrer.close()
        for worker in workers:
            stop_process(worker)
    return result


# --- pgqueuer -----------------------------------------------------------------------------------


def run_pgqueuer(args, bar: Bar) -> dict:
    import psycopg

    python = bench_python()
    dsn = recreate_database(PGQUEUER_DB)
    env = compared_env(BENCH_PGQUEUER_DSN=dsn)
    subprocess.run(
        [str(BENCH_VENV / "bin" / "pgq"), "--pg-dsn", dsn, "install"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
    )
    prefix = os.environ["JOBWEAVER_KAFKA_TOPIC_PREFIX"]
    with log_file(f"{prefix}pgqueuer-worker.log") as log:
        worker = subprocess.Popen(
            [
                *(str(python), "-m", "bench.pgqueuer_app"),
                *("worker", str(args.pgqueuer_batch_size)),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def successful() -> int:
        with psycopg.connect(dsn) as conn:
            return conn.execute(
                "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"
            ).fetchone()[0]

    result: dict = {"n": args.jobs}
    enqueuer = None
    try:
        enqueuer = Enqueuer(
            [str(python), "-m", "bench.pgqueuer_app", "enqueue"],
            env,
            f"{prefix}pgqueuer-enqueue.log",
        )
        warm_n = 2 * args.pgqueuer_batch_size
        warm = bar.add("pgq warm-up", warm_n)
        enqueuer.enqueue("warmup", warm_n)
        if wait_progress(bar, warm, warm_n, successful, stall_seconds=60) < warm_n:
            raise RuntimeError("pgqueuer warm-up failed")
        result["load_start"] = load()
        meter = CpuMeter(
            {"worker": (worker.pid, False), "publisher": (enqueuer.pid, False)},
            servers=("postgres",),
        )
        meter.start()
        task = bar.add("pgqueuer", args.jobs)
        enqueued: dict = {}

        def enqueue_all() -> None:
            enqueued["at"] = enqueuer.enqueue("run", args.jobs)

        thread = threading.Thread(target=enqueue_all, daemon=True)
        thread.start()
        done = wait_progress(bar, task, args.jobs, lambda: max(0, successful() - warm_n))
        thread.join()
        result["cpu"] = meter.stop()
        result["load_end"] = load()
        with psycopg.connect(dsn) as conn:
            (last,) = conn.execute(
                "SELECT max(created) FROM pgqueuer_log WHERE status = 'successful'"
            ).fetchone()
        started, ended = enqueued["at"]
        result.update(completed=done, publish_s=ended - started, elapsed=last.timestamp() - started)
    finally:
        if enqueuer is not None:
            enqueuer.close()
        stop_process(worker)
    return result


# --- report -------------------------------------------------------------------------------------


# Frames only the executor's threads that run jobs have: the Celery threads of run-job records
# and the slot threads (apps/executor/slots.py).
JOB_THREAD_MARKS = ("run_job", "_run_on_slot_thread", "_start_on_slot_thread")


def summarise_profile(path: Path, top: int = 12, *, cpu: bool = False) -> list[str]:
    """py-spy raw (collapsed) stacks of the executor: where its task threads spend their time,
    or (`cpu`: sampled without --idle) where all its threads spend its CPU, by thread too."""
    if not path.exists():
        return [f"profile: {path} missing"]
    self_time: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = 0
    connect = "PostgreSQL: opening a new connection (psycopg connect)"
    query = "PostgreSQL: queries and commits (psycopg)"
    kafka = "Kafka (confluent_kafka)"
    buckets = {connect: 0, query: 0, kafka: 0, "everything else (Python)": 0}
    threads: dict[str, int] = {}
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        if not cpu and not any(mark in stack for mark in JOB_THREAD_MARKS):
            continue  # only the threads running jobs: the records' and the slots'
        n = int(count)
        total += n
        frames = stack.split(";")
        thread = re.sub(r"\(\d+\)|_\d+$", "", frames[0].split(": ", 1)[-1])
        threads[thread] = threads.get(thread, 0) + n
        self_time[frames[-1]] = self_time.get(frames[-1], 0) + n
        seen = set()
        for frame in frames:
            if ("(apps/" in frame or "(kombu_kafka/" in frame) and frame not in seen:
                seen.add(frame)
                inclusive[frame] = inclusive.get(frame, 0) + n
        if "get_new_connection" in stack:
            buckets[connect] += n
        elif "psycopg" in stack:
            buckets[query] += n
        elif "confluent_kafka" in stack or "kombu_kafka" in frames[-1]:
            buckets[kafka] += n
        else:
            buckets["everything else (Python)"] += n
    if not total:
        return ["profile: no samples of threads running jobs"]
    if cpu:
        lines = [f"profile: {total} samples of the executor's threads on the CPU"]
    else:
        lines = [f"profile: {total} samples of the executor's threads running jobs"]
    for name, n in buckets.items():
        lines.append(f"  {100 * n / total:5.1f}%  {name}")
    if cpu:
        lines.append("  by thread:")
        for name, n in sorted(threads.items(), key=lambda kv: -kv[1])[:top]:
            lines.append(f"  {100 * n / total:5.1f}%  {name}")
    lines.append("  top self time (leaf frames):")
    for frame, n in sorted(self_time.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {100 * n / total:5.1f}%  {frame}")
    lines.append("  top inclusive time in project code:")
    for frame, n in sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {100 * n / total:5.1f}%  {frame}")
    return lines


def pct(values: list[float], digits: int = 0) -> str:
    return " / ".join(f"{v:.{digits}f}" for v in values) if values else "-"


def report(args, results: dict) -> None:
    from django.conf import settings

    n = args.jobs
    print()
    print(
        f"N = {n} jobs; JobWeaver: {args.executors} executor(s) x {args.threads} threads "
        f"(prefetch {settings.JOBWEAVER_DISPATCH_PREFETCH}), "
        f"web {args.web_workers} gunicorn workers x {args.web_threads} threads, "
        f"{args.clients} HTTP clients x {args.per_request} jobs/request; "
        f"stock Celery (Kafka, Redis): {args.workers} worker(s) of the threads pool, "
        f"{args.concurrency} threads (as our executor's slots), prefetch multiplier "
        f"{celery_prefetch(args)}, acks {'late' if celery_acks_late(args) else 'early'}, "
        "otherwise Celery's defaults; "
        f"procrastinate: {args.workers} worker(s), concurrency {args.concurrency}; "
        f"pgqueuer: 1 worker, batches of {args.pgqueuer_batch_size}, concurrency unlimited "
        "(its defaults)"
    )
    print()
    header = f"| {'system':<52} | {'done':>5} | {'seconds':>7} | {'jobs/s':>7} | load start → end |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for side in SIDES:
        r = results.get(side)
        if r is None:
            continue
        if "error" in r:
            print(f"| {SIDE_NAMES[side]:<52} | FAILED: {r['error']}")
            continue
        rate = r["completed"] / r["elapsed"] if r["elapsed"] else 0
        print(
            f"| {SIDE_NAMES[side]:<52} | {r['completed']:>5} | {r['elapsed']:>7.1f} | "
            f"{rate:>7.0f} | {r['load_start']} → {r['load_end']} |"
        )
    ours = results.get("ours")
    if ours and "error" not in ours:
        print()
        print("JobWeaver latency (ms, database times: job created_at → started_at / finished_at)")
        print(f"  submit→RUNNING   p50 / p95 / p99: {pct(ours['running'])}")
        print(f"  submit→COMPLETED p50 / p95 / p99: {pct(ours['completed_ms'])}")
        print(
            f"  attempts in progress on average: {ours['busy_slots']:.2f} of "
            f"{args.executors * args.threads} threads (each attempt from its start to its "
            f"finish on the database clock); a delivery waited "
            f"{ours['dispatched_to_started_ms']:.1f} ms on average from dispatch to its start"
        )
        print(
            f"  a credit's legs p5 / p50 / p95: dispatched→started {pct(ours['to_start_ms'], 1)}, "
            f"started→finished {pct(ours['attempt_ms'], 1)}"
        )
        parts = ours["first_job_parts"]
        print(
            f"  first job after the web started, submit→RUNNING: {ours['first_job_ms']:.0f} = "
            f"request → created_at {parts[0]:.0f} + → dispatched_at {parts[1]:.0f} + "
            f"→ started_at {parts[2]:.0f}"
        )
        req = ours["request_ms"]
        print(
            f"  submission: {len(req)} batch requests in {ours['submit_s']:.1f} s "
            f"(request ms min {req[0]:.0f}, max {req[-1]:.0f})"
            if req and ours["submit_s"]
            else ""
        )
        per = ours["per_job"]
        print(
            "  per job (pg_stat_database of the bench database, whole stack, incl. outbox and this "
            f"script's polling): {per['sessions']:.2f} new PostgreSQL sessions, "
            f"{per['transactions']:.1f} transactions, "
            f"{per['inserted']:.1f} rows inserted, {per['updated']:.1f} updated, "
            f"{per['deleted']:.1f} deleted, {per['fetched']:.1f} fetched"
        )
        print(
            "  rows read per job by scan (pg_stat_user_indexes/_tables): "
            + "; ".join(
                f"{name} {rows / n:.0f} rows in {count / n:.1f} scans"
                for name, (count, rows) in ours["scans"]
            )
        )
        print(
            "  RSS after the run: executor(s) "
            + ", ".join(f"{x:.0f}" for x in ours["rss_executor_mib"])
            + f" MiB, web (master + workers) {ours['rss_web_mib']:.0f} MiB"
        )
    print()
    for side in SIDES:
        r = results.get(side)
        if r and "error" not in r and r.get("publish_s") is not None:
            extra = f", duplicate deliveries {r['duplicates']}" if "duplicates" in r else ""
            print(f"{side}: all {r['n']} enqueued after {r['publish_s']:.1f} s{extra}")
    if ours and ours.get("profile_path"):
        print()
        for line in summarise_profile(ours["profile_path"], top=25, cpu=ours["profile_cpu"]):
            print(line)
        print(f"  raw stacks: {ours['profile_path']}")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    overrides = {
        "JOBWEAVER_EXECUTOR_CONCURRENCY": str(args.threads),
        "DJANGO_DEBUG": "1" if args.debug else "0",
    }
    if args.prefetch is not None:
        overrides["JOBWEAVER_DISPATCH_PREFETCH"] = str(args.prefetch)
    if not args.debug:
        overrides["DJANGO_SECRET_KEY"] = "bench-only-" + uuid.uuid4().hex
    configure(database=OURS_DB, **overrides)
    try:
        return run(args)
    finally:
        from django.db import connections

        drop_topics(os.environ["JOBWEAVER_KAFKA_TOPIC_PREFIX"])
        connections.close_all()
        for name in (OURS_DB, CELERY_DB, PROCRASTINATE_DB, PGQUEUER_DB):
            drop_database(name)


def run(args) -> int:
    runners = {
        "ours": run_ours,
        "ours-processes": lambda args, bar: run_ours(args, bar, pool="processes"),
        "celery": run_celery,
        "celery-redis": run_celery_redis,
        "procrastinate": run_procrastinate,
        "pgqueuer": run_pgqueuer,
    }
    rounds: list[dict] = []
    with Bar() as bar:
        warm_up(args, bar)
        for number in range(1, args.rounds + 1):
            results: dict = {}
            for side in args.only:
                try:
                    results[side] = runners[side](args, bar)
                except Exception as exc:  # noqa: BLE001 - report the other sides anyway
                    bar.note(f"{side} failed: {exc!r}")
                    results[side] = {"error": repr(exc)[:200]}
            rounds.append(results)
            if args.rounds > 1:
                rates = ", ".join(f"{side} {rate:.0f}" for side, rate in _rates(results).items())
                bar.note(f"round {number} of {args.rounds}, jobs/s: {rates}")
                bar.note(f"  CPU per job: {_cpu_line(results)}")
    report(args, rounds[-1])
    if args.rounds > 1:
        report_rounds(args, rounds)
    report_systems(args, rounds)
    failed = [
        side
        for results in rounds
        for side, r in results.items()
        if "error" in r or r["completed"] < args.jobs
    ]
    return 1 if failed else 0


def warm_up(args, bar: Bar) -> None:
    """An untimed pass of --warm-up-jobs jobs through our whole stack before the first round.

    `make bench` usually starts the PostgreSQL and Kafka servers it measures on, and a broker
    just started costs several times its steady CPU per record for its first minutes (the
    JVM's compilers and heap at work, most likely): measured with `--warm-up-jobs 0`, Kafka's
    CPU per job of ours was 1.36, 1.30, 1.09 and 0.76 ms over four rounds of 5,000 jobs on a
    fresh broker, then 0.41, 0.40 and 0.32 ms in three more on the same broker, where the
    executor's own stayed at 1.3-2.1 ms throughout. Those first rounds measured the broker's
    start, not the steady state a long-running broker (or a reused stack) gives every side.
    The pass warms the servers that stock Celery (Kafka) and procrastinate (PostgreSQL) use
    too; on a stack already warm, `--warm-up-jobs 0` skips it."""
    if not args.warm_up_jobs or not {"ours", "celery"} & set(args.only):
        return
    warm_args = argparse.Namespace(
        **{**vars(args), "jobs": args.warm_up_jobs, "profile": False, "profile_cpu": False}
    )
    result = run_ours(warm_args, bar)
    rate = _rates({"ours": result}).get("ours")
    bar.note(
        f"warm-up (not counted): {args.warm_up_jobs} jobs through our stack"
        + (f" at {rate:.0f} jobs/s" if rate else "")
        + f"; CPU per job: {_cpu_line({'ours': result})}"
    )


def cpu_budget(r: dict) -> dict | None:
    """Where a side's CPU went, per job, and what it implies on this machine: the whole stack's
    CPU per job (the system's processes: not this script, whose HTTP clients and polling stand
    for the users), each role's, the share of the cores every measured process kept busy, and
    the rate that CPU per job would allow with every core busy (this script included: it
    shares the cores). A side far below its ceiling waited (on I/O, on polls, on a pipeline)
    rather than worked."""
    if "error" in r or not r.get("cpu") or not r.get("completed") or not r.get("elapsed"):
        return None
    cores = os.cpu_count() or 1
    every = sum(r["cpu"].values())
    roles = {role: 1000 * s / r["completed"] for role, s in r["cpu"].items()}
    return {
        "ms": sum(ms for role, ms in roles.items() if role != CpuMeter.SCRIPT),
        "busy": every / (r["elapsed"] * cores),
        "ceiling": cores * r["completed"] / every if every else math.inf,
        "roles": roles,
    }


def _cpu_line(results: dict) -> str:
    """A round's CPU per job, side by side, with each side's largest parts (ms): one line, so
    a round that ran on a cold or busy machine shows where its time went."""
    parts = []
    for side, r in results.items():
        budget = cpu_budget(r)
        if budget is None:
            continue
        roles = sorted(budget["roles"].items(), key=lambda kv: -kv[1])[:4]
        parts.append(
            f"{side} {budget['ms']:.2f} ("
            + ", ".join(f"{role} {ms:.2f}" for role, ms in roles)
            + ")"
        )
    return "; ".join(parts) or "-"


def _rates(results: dict) -> dict[str, float]:
    return {
        side: r["completed"] / r["elapsed"]
        for side, r in results.items()
        if "error" not in r and r["elapsed"]
    }


def _table(header: list[str], rows: list[list[str]]) -> None:
    """A Markdown table, the first column left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        first, *rest = cells
        return (
            f"| {first:<{widths[0]}} | "
            + " | ".join(f"{c:>{w}}" for c, w in zip(rest, widths[1:], strict=True))
            + " |"
        )

    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print(line(row))


def _ratio(rate: dict, other: str) -> float | None:
    if "ours" in rate and rate.get(other):
        return rate["ours"] / rate[other]
    return None


def report_rounds(args, rounds: list[dict]) -> None:
    """Every round's jobs/s and ratios, then the medians. One round on this shared machine can
    be 20% off the next (the same code gave 501 to 660 jobs/s within half an hour): quote the
    medians. Two ratios are printed, the ratio of the medians and the median of the rounds'
    ratios; when they differ much, the rounds disagreed."""
    sides = [side for side in SIDES if side in args.only]
    rates = [_rates(results) for results in rounds]
    others = [side for side in sides if side != "ours"] if "ours" in sides else []

    def cell(value: float | None, fmt: str) -> str:
        return "-" if value is None else format(value, fmt)

    def row(label: str, rate: dict) -> list[str]:
        return [
            label,
            *(cell(rate.get(side), ".0f") for side in sides),
            *(cell(_ratio(rate, other), ".2f") for other in others),
        ]

    medians = {
        side: statistics.median(r[side] for r in rates if side in r)
        for side in sides
        if any(side in r for r in rates)
    }
    print()
    print(f"Rounds (jobs/s, N = {args.jobs}; the sides ran in turn: {', '.join(sides)})")
    _table(
        ["round", *sides, *(f"ours/{other}" for other in others)],
        [*(row(str(number), rate) for number, rate in enumerate(rates, 1)), row("median", medians)],
    )
    for other in others:
        per_round = [x for x in (_ratio(rate, other) for rate in rates) if x is not None]
        if per_round:
            print(
                f"ours/{other}: {_ratio(medians, other) or 0:.2f}x of the medians, "
                f"{statistics.median(per_round):.2f}x the median of the rounds' ratios"
            )


def report_systems(args, rounds: list[dict]) -> None:
    """Every system side by side over the rounds' medians: jobs/s, the whole stack's CPU per job
    and each process's share of it, then ours against each: the ratio of the jobs/s and of the
    CPU per job. Each figure is its own median, so with several rounds the shares need not add
    up to the median whole."""
    sides = [side for side in SIDES if side in args.only]
    medians: dict[str, dict[str, float]] = {}
    for side in sides:
        runs = [
            results[side]
            for results in rounds
            if side in results and "error" not in results[side] and results[side]["elapsed"]
        ]
        if not runs:
            continue
        row = {"jobs/s": statistics.median(r["completed"] / r["elapsed"] for r in runs)}
        budgets = [b for b in map(cpu_budget, runs) if b]
        if budgets:
            row["stack"] = statistics.median(b["ms"] for b in budgets)
            row["busy"] = statistics.median(b["busy"] for b in budgets)
            row["ceiling"] = statistics.median(b["ceiling"] for b in budgets)
            for role in {role for b in budgets for role in b["roles"]}:
                row[role] = statistics.median(
                    b["roles"][role] for b in budgets if role in b["roles"]
                )
        medians[side] = row
    if not medians:
        return
    columns = [
        (role, title) for role, title in ROLE_COLUMNS if any(role in m for m in medians.values())
    ]
    columns.append((CpuMeter.SCRIPT, "this script*"))

    def cell(row: dict, key: str, fmt: str) -> str:
        return "-" if key not in row else format(row[key], fmt)

    over = f"medians of {len(rounds)} rounds" if len(rounds) > 1 else "one round"
    print()
    print(
        f"Every system, {over}, "
        f"N = {args.jobs}: jobs/s and CPU per job in ms (utime + stime of each process over "
        f"the timed run, {os.cpu_count()} cores); 'whole stack' sums the system's processes"
    )
    _table(
        [
            "system",
            "jobs/s",
            "whole stack",
            *(title for _, title in columns),
            "cores busy",
            "ceiling",
        ],
        [
            [
                side,
                cell(row, "jobs/s", ".0f"),
                cell(row, "stack", ".2f"),
                *(cell(row, role, ".2f") for role, _ in columns),
                cell(row, "busy", ".0%"),
                cell(row, "ceiling", ".0f"),
            ]
            for side, row in medians.items()
        ],
    )
    print(
        "  publisher: the system's enqueuing process (Celery's send_task, procrastinate's "
        "batch_defer, pgqueuer's enqueue), ours being the web; PostgreSQL and Kafka: the whole "
        "shared server; *this script: HTTP clients (ours) and polling, not in the whole stack; "
        "ceiling: jobs/s with every core busy at the CPU per job of every measured process"
    )
    ours = medians.get("ours")
    if ours is None:
        return
    for other, row in medians.items():
        if other == "ours":
            continue
        cpu = (
            f", {ours['stack'] / row['stack']:.2f}x the CPU per job"
            if row.get("stack") and "stack" in ours
            else ""
        )
        print(f"ours / {other}: {ours['jobs/s'] / row['jobs/s']:.2f}x the jobs/s{cpu}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
