"""The pgqueuer side of `make bench` (bench/throughput.py): one no-op entrypoint.

Runs only in the bench-only virtualenv (.cache/bench-venv, bench/requirements-bench-venv.txt),
never in the product's. Its database (BENCH_PGQUEUER_DSN) is on the same PostgreSQL server as
JobWeaver's and gets pgqueuer's own schema (`pgq install`). asyncpg is the driver, pgqueuer's
first (its CLI's default).

    python -m bench.pgqueuer_app worker 10   # the worker, dequeuing batches of 10
    python -m bench.pgqueuer_app enqueue     # the enqueuing process (bench/enqueuer.py)

The worker is `pgqueuer.run`, what `pgq run` calls, on uvloop as `pgq run` runs it: `pgq run`
itself fails in 1.6.0 with the typer this venv resolves ('str' object has no attribute 'name',
its --log-level parsing, default included).

A job is done when pgqueuer logs it 'successful' in pgqueuer_log (its own record of each job's
end, kept after the statistics fold it in).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pgqueuer
import uvloop
from pgqueuer import AsyncpgDriver, Job, PgQueuer, Queries
from pgqueuer.core import logconfig

ENTRYPOINT = "bench_noop"


@asynccontextmanager
async def create_pgqueuer() -> AsyncIterator[PgQueuer]:
    """The worker's factory for `pgq run`, as pgqueuer's documentation writes one."""
    connection = await asyncpg.connect(os.environ["BENCH_PGQUEUER_DSN"])
    pgq = PgQueuer(AsyncpgDriver(connection))

    @pgq.entrypoint(ENTRYPOINT)
    async def noop(job: Job) -> None:
        """Nothing: the queue's own cost is what is measured (dequeue, run, log)."""

    try:
        yield pgq
    finally:
        await connection.close()


def work(batch_size: int) -> None:
    """One worker process at pgqueuer's defaults but for the batch size, until SIGTERM."""
    logconfig.setup_fancy_logger(logconfig.LogLevel.WARNING)
    uvloop.run(pgqueuer.run(create_pgqueuer, batch_size=batch_size))


def enqueue_forever() -> None:
    """Each request's jobs in one `Queries.enqueue` of lists (one INSERT), on one connection."""
    from bench.enqueuer import serve

    with asyncio.Runner() as runner:
        connection = runner.run(asyncpg.connect(os.environ["BENCH_PGQUEUER_DSN"]))
        queries = Queries(AsyncpgDriver(connection))

        def enqueue(_run_id: str, count: int) -> None:
            runner.run(queries.enqueue([ENTRYPOINT] * count, [None] * count, [0] * count))

        serve(enqueue)
        runner.run(connection.close())


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"] and len(sys.argv) == 3:
        work(int(sys.argv[2]))
    elif sys.argv[1:] == ["enqueue"]:
        enqueue_forever()
    else:
        sys.exit("usage: python -m bench.pgqueuer_app worker BATCH_SIZE | enqueue")
