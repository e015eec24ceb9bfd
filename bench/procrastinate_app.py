"""The procrastinate side of `make bench` (bench/throughput.py): one no-op task.

Runs only in the bench-only virtualenv (.cache/bench-venv, bench/requirements-procrastinate.txt),
never in the product's. Its database (BENCH_PROCRASTINATE_DSN) is on the same PostgreSQL server
as JobWeaver's and gets procrastinate's own schema (`procrastinate schema --apply`).

    procrastinate --app=bench.procrastinate_app.app worker --concurrency 4 --queues bench
    python -m bench.procrastinate_app defer N     # batch_defer N jobs, prints the start time
"""

from __future__ import annotations

import os
import sys
import time

import procrastinate

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(conninfo=os.environ["BENCH_PROCRASTINATE_DSN"])
)


@app.task(name="bench.noop", queue="bench")
async def noop() -> None:
    """Nothing: the queue's own cost is what is measured (fetch, run, mark succeeded)."""


def defer(count: int) -> None:
    """`count` jobs in one batch_defer (one INSERT); prints the epoch second it started at."""
    with app.open():
        started = time.time()
        noop.batch_defer(*({} for _ in range(count)))
        print(f"{started:.6f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "defer":
        sys.exit("usage: python -m bench.procrastinate_app defer N")
    defer(int(sys.argv[2]))
