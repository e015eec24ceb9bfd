"""The procrastinate side of `make bench` (bench/throughput.py): one no-op task.

Runs only in the bench-only virtualenv (.cache/bench-venv, bench/requirements-bench-venv.txt),
never in the product's. Its database (BENCH_PROCRASTINATE_DSN) is on the same PostgreSQL server
as JobWeaver's and gets procrastinate's own schema (`procrastinate schema --apply`).

    procrastinate --app=bench.procrastinate_app.app worker --concurrency 4 --queues bench
    python -m bench.procrastinate_app enqueue     # the deferring process (bench/enqueuer.py)
"""

from __future__ import annotations

import os
import sys

import procrastinate

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(conninfo=os.environ["BENCH_PROCRASTINATE_DSN"])
)


@app.task(name="bench.noop", queue="bench")
async def noop() -> None:
    """Nothing: the queue's own cost is what is measured (fetch, run, mark succeeded)."""


def enqueue_forever() -> None:
    """Each request's jobs in one batch_defer (one INSERT), on one open connector."""
    from bench.enqueuer import serve

    with app.open():
        serve(lambda _run_id, count: noop.batch_defer(*({} for _ in range(count))))


if __name__ == "__main__":
    if sys.argv[1:] != ["enqueue"]:
        sys.exit("usage: python -m bench.procrastinate_app enqueue")
    enqueue_forever()
