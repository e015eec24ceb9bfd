"""Concurrent batch submissions through the API: one user's clients against as many users'.

    infra/with-stack.sh .venv/bin/python bench/batch_submit.py [--clients 4] [--batches 24]

The per-user active-jobs cap (ARCHITECTURE §10, JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER) takes a
lock per user in the submit transaction, so that concurrent submissions of one user never pass
the cap between them. Whatever that lock covers runs one at a time for one user. This measures
what that costs a user whose clients submit in parallel (one service account, several threads):
--clients threads post --batches batches of --per-request LOG jobs through gunicorn, first all
as one user, then each client as a user of its own, alternating for --rounds rounds (fresh
users every time, so no round counts another's jobs). Nothing runs the jobs (no executor is
registered); only the submission is timed. Prints jobs/s and request times per side, the
medians over the rounds and the ratio one user / many users (1.0 = no cost).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from common import api_token, configure, drop_database, drop_topics, running_web
from throughput import Client

DATABASE = f"jobweaver_bench_submit_{uuid.uuid4().hex[:8]}"


def one_side(base: str, *, users: int, clients: int, batches: int, per_request: int) -> dict:
    tokens = [api_token(f"submit-{uuid.uuid4().hex[:8]}") for _ in range(users)]
    client_of = [Client(base, tokens[i % users]) for i in range(clients)]
    request_ms: list[float] = []

    def worker(index: int) -> None:
        client = client_of[index]
        for _ in range(index, batches, clients):
            started = time.monotonic()
            client.post(per_request)
            request_ms.append((time.monotonic() - started) * 1000)

    with ThreadPoolExecutor(clients) as pool:
        # Warm each client's session and each gunicorn thread's connection first.
        list(pool.map(lambda i: client_of[i].post(1), range(clients)))
        t0 = time.monotonic()
        list(pool.map(worker, range(clients)))
        elapsed = time.monotonic() - t0
    request_ms.sort()
    return {
        "rate": batches * per_request / elapsed,
        "p50": request_ms[len(request_ms) // 2],
        "max": request_ms[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=4, help="client threads (4)")
    parser.add_argument("--batches", type=int, default=24, help="batch requests per side (24)")
    parser.add_argument("--per-request", type=int, default=1000, help="jobs per batch (1000)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both sides (3)")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn workers (2)")
    parser.add_argument("--web-threads", type=int, default=4, help="threads per worker (4)")
    args = parser.parse_args()
    total = args.batches * args.per_request
    configure(database=DATABASE, DJANGO_DEBUG="0", DJANGO_SECRET_KEY="bench-" + DATABASE)
    env = {
        "JOBWEAVER_SUBMIT_THROTTLE_RATE": str(10 * total),
        "JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER": str(2 * total),
        "JOBWEAVER_SECURE_SSL_REDIRECT": "0",
    }
    results: dict[str, list[dict]] = {"one user": [], "a user per client": []}
    try:
        with running_web(workers=args.web_workers, threads=args.web_threads, **env) as (base, _):
            for number in range(1, args.rounds + 1):
                for side, users in (("one user", 1), ("a user per client", args.clients)):
                    r = one_side(
                        base,
                        users=users,
                        clients=args.clients,
                        batches=args.batches,
                        per_request=args.per_request,
                    )
                    results[side].append(r)
                    print(
                        f"round {number}  {side:<18} {r['rate']:7.0f} jobs/s  "
                        f"request p50 {r['p50']:6.0f} ms, max {r['max']:6.0f} ms",
                        flush=True,
                    )
    finally:
        from django.db import connections

        connections.close_all()
        drop_database(DATABASE)
        drop_topics(os.environ["JOBWEAVER_KAFKA_TOPIC_PREFIX"])
    medians = {side: statistics.median(r["rate"] for r in rs) for side, rs in results.items()}
    print(
        f"\n{args.clients} clients, {args.batches} batches of {args.per_request} per side; "
        f"gunicorn {args.web_workers}x{args.web_threads}; medians of {args.rounds} rounds:"
    )
    for side, rate in medians.items():
        p50 = statistics.median(r["p50"] for r in results[side])
        print(f"  {side:<18} {rate:7.0f} jobs/s, request p50 {p50:.0f} ms")
    ratio = medians["one user"] / medians["a user per client"]
    print(f"  one user / a user per client: {ratio:.2f}")


if __name__ == "__main__":
    main()
