"""Soak: a steady half of peak throughput for ten minutes (issue 9's third target).

    make bench-soak ARGS="--minutes 10"
    (or: infra/with-stack.sh .venv/bin/python bench/soak.py --help)

The same stack as `make bench` (bench/throughput.py): scheduler, beat, E executors of T threads
and a gunicorn web process. First an untimed burst warms the servers (--warm-up-jobs), then a
burst of --peak-jobs one-LOG jobs through the batch API gives the peak jobs/s; unless --rate is
given, the soak then submits half of that, steadily: every --tick seconds one
`POST /api/jobs/batch` with the jobs due by then. Every minute it prints the RSS of each
executor and of the web process (gunicorn master + workers), what is waiting, and
submit→RUNNING p50/p99 of the jobs submitted in that minute (database times). At the end the
per-minute table again, complete, and the verdict: RSS growth from the first minute to the last
(< 10%) and each minute's p99 against the first minute's (≤ 2x).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from common import api_token, configure, drop_database, rss_mib, running_stack, running_web
from throughput import Client, execution_counts, latency_stats, load, wait_completed


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10, help="soak length (default 10)")
    parser.add_argument(
        "--rate", type=float, default=None, help="jobs/s (default: half the measured peak)"
    )
    parser.add_argument(
        "--peak-jobs", type=int, default=3000, help="burst that measures the peak (default 3000)"
    )
    parser.add_argument(
        "--warm-up-jobs",
        type=int,
        default=25_000,
        help="an untimed burst before the peak's, to warm the PostgreSQL and Kafka servers "
        "(bench/throughput.py's warm_up; default 25000, 0: none)",
    )
    parser.add_argument("--tick", type=float, default=0.2, help="seconds between submits (0.2)")
    parser.add_argument("--executors", type=int, default=1)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--web-threads", type=int, default=4)
    return parser.parse_args(argv)


def minute_latencies(
    since: datetime, only: int | None = None
) -> list[tuple[int, int, int, float, float]]:
    """Per minute since `since`: (minute, jobs, started, p50, p99 submit→RUNNING in ms);
    `only`: that minute alone. The report during the soak reads the minute just ended: over
    every minute since the start, the query took 115-256 ms by the ninth minute (PostgreSQL's
    slow-statement log), a core's work landing on the stack at each minute's turn."""
    from django.db import connection

    start = since if only is None else since + timedelta(minutes=only)
    end = datetime.max.replace(tzinfo=UTC) if only is None else start + timedelta(minutes=1)
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT floor(extract(epoch FROM j.created_at - %s) / 60)::int AS minute,
                   count(*), count(e.started_at),
                   percentile_cont(0.5) WITHIN GROUP
                       (ORDER BY extract(epoch FROM e.started_at - j.created_at)) * 1000,
                   percentile_cont(0.99) WITHIN GROUP
                       (ORDER BY extract(epoch FROM e.started_at - j.created_at)) * 1000
            FROM jobweaver_jobs_job j JOIN jobweaver_scheduler_jobexecution e ON e.job_id = j.id
            WHERE j.created_at >= %s AND j.created_at < %s
            GROUP BY 1 ORDER BY 1
            """,
            [since, start, end],
        )
        return cursor.fetchall()


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    database = f"jobweaver_bench_soak_{uuid.uuid4().hex[:8]}"
    configure(
        database=database,
        JOBWEAVER_EXECUTOR_CONCURRENCY=str(args.threads),
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="bench-only-" + uuid.uuid4().hex,
    )
    try:
        return soak(args)
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(database)


def soak(args) -> int:
    from jobweaver.scheduler.flow import live_executors

    token = api_token()
    web_env = {
        "JOBWEAVER_SUBMIT_THROTTLE_RATE": "100000000",
        "JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER": "100000000",
        "JOBWEAVER_SECURE_SSL_REDIRECT": "0",
    }
    with (
        running_stack(executors=args.executors) as processes,
        running_web(workers=args.web_workers, threads=args.web_threads, **web_env) as (base, web),
    ):
        while len([r for r in live_executors() if r.partitions]) < args.executors:
            time.sleep(0.2)
        client = Client(base, token)
        with ThreadPoolExecutor(4) as pool:
            wait_completed([j for ids in pool.map(client.post, [1] * 8) for j in ids])
        executors = [p.pid for p in processes if p.role == "executor"]

        # --- peak ---------------------------------------------------------------------------
        rate = args.rate
        if rate is None:
            # A peak measured on a broker just started measures its start (bench/throughput.py's
            # warm_up), and the soak's "half of peak" would be half of that.
            if args.warm_up_jobs:
                warm_since = datetime.now(UTC)
                burst(client, args.warm_up_jobs)
                warm = latency_stats(warm_since)
                print(
                    f"warm-up: {args.warm_up_jobs} jobs at "
                    f"{warm['completed'] / (warm['last'] - warm_since).total_seconds():.0f} "
                    "jobs/s (not counted)",
                    flush=True,
                )
            since = datetime.now(UTC)
            burst(client, args.peak_jobs)
            peak = latency_stats(since)
            peak_rate = peak["completed"] / (peak["last"] - since).total_seconds()
            rate = peak_rate / 2
            print(
                f"peak: {args.peak_jobs} jobs at {peak_rate:.0f} jobs/s (load {load()}); "
                f"soak at {rate:.0f} jobs/s for {args.minutes:g} min",
                flush=True,
            )
            time.sleep(2)

        # --- steady half of peak ------------------------------------------------------------
        stop = threading.Event()
        sent = {"jobs": 0, "late_ticks": 0, "errors": 0}
        baseline = execution_counts()
        soak_start = datetime.now(UTC)
        t0 = time.monotonic()
        end = t0 + args.minutes * 60

        def submitter() -> None:
            next_tick = t0
            while not stop.is_set() and time.monotonic() < end:
                due = int(rate * (time.monotonic() - t0)) - sent["jobs"]
                for start in range(0, due, 1000):
                    try:
                        client.post(min(1000, due - start))
                        sent["jobs"] += min(1000, due - start)
                    except Exception as exc:  # noqa: BLE001 - count and go on
                        sent["errors"] += 1
                        print(f"submit error: {exc!r}"[:300], file=sys.stderr, flush=True)
                next_tick += args.tick
                pause = next_tick - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                else:
                    sent["late_ticks"] += 1

        thread = threading.Thread(target=submitter, daemon=True)
        thread.start()
        print(
            "minute | submitted | waiting | executor RSS MiB | web RSS MiB | "
            "RUNNING p50 / p99 ms (started/submitted that minute) | load",
            flush=True,
        )
        samples: list[tuple[list[float], float]] = []
        minute = 0
        try:
            while time.monotonic() < end:
                minute += 1
                time.sleep(max(0, t0 + minute * 60 - time.monotonic()))
                rss = ([rss_mib(pid) for pid in executors], rss_mib(web.pid, with_children=True))
                samples.append(rss)
                counts = execution_counts(baseline)
                waiting = sum(counts.get(s, 0) for s in ("PENDING", "DISPATCHED", "RUNNING"))
                rows = {r[0]: r for r in minute_latencies(soak_start, only=minute - 1)}
                row = rows.get(minute - 1)
                lat = f"{row[3] or 0:6.0f} / {row[4] or 0:6.0f} ({row[2]}/{row[1]})" if row else "-"
                print(
                    f"{minute:6d} | {sent['jobs']:9d} | {waiting:7d} | "
                    f"{', '.join(f'{x:.0f}' for x in rss[0]):>16} | {rss[1]:11.0f} | "
                    f"{lat} | {load()}",
                    flush=True,
                )
        finally:
            stop.set()
            thread.join()
        all_ids_done = time.monotonic() + 120
        while (
            sum(execution_counts(baseline).get(s, 0) for s in ("PENDING", "DISPATCHED", "RUNNING"))
            and time.monotonic() < all_ids_done
        ):
            time.sleep(0.5)
        final = execution_counts(baseline)

    rows = minute_latencies(soak_start)
    print()
    print(
        f"soak: {args.minutes:g} min at {rate:.0f} jobs/s target; {sent['jobs']} jobs submitted "
        f"({sent['jobs'] / (args.minutes * 60):.0f} jobs/s), late ticks {sent['late_ticks']}, "
        f"submit errors {sent['errors']}; final statuses {final}"
    )
    print("minute | jobs | p50 ms | p99 ms")
    for m, jobs, _started, p50, p99 in rows:
        if m < args.minutes:
            print(f"{m + 1:6d} | {jobs:4d} | {p50 or 0:6.0f} | {p99 or 0:6.0f}")
    ok = True
    if samples:
        first, last = samples[0], samples[-1]
        for i, (a, b) in enumerate(zip(first[0], last[0], strict=True)):
            growth = 100 * (b - a) / a
            ok &= growth < 10
            print(f"executor {i + 1} RSS {a:.0f} → {b:.0f} MiB ({growth:+.1f}%; target < 10%)")
        growth = 100 * (last[1] - first[1]) / first[1]
        ok &= growth < 10
        print(f"web RSS {first[1]:.0f} → {last[1]:.0f} MiB ({growth:+.1f}%; target < 10%)")
    minutes = [r for r in rows if r[0] < args.minutes and r[4] is not None]
    if minutes:
        base = minutes[0][4]
        worst = max(r[4] for r in minutes)
        ok &= worst <= 2 * base
        print(
            f"p99 first minute {base:.0f} ms, worst minute {worst:.0f} ms "
            f"({worst / base:.2f}x; target ≤ 2x)"
        )
    print("targets", "MET" if ok else "NOT MET")
    return 0 if ok else 1


def burst(client, jobs: int) -> None:
    """Submit `jobs` one-LOG jobs at once (four clients, batches of 1,000) and wait until
    they are all COMPLETED."""
    chunks = [min(1000, jobs - i) for i in range(0, jobs, 1000)]
    with ThreadPoolExecutor(4) as pool:
        ids = [j for batch in pool.map(client.post, chunks) for j in batch]
    wait_completed(ids, timeout=600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
