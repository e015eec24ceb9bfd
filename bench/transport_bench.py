"""Our Kafka transport against kombu's stock `confluentkafka` transport, same broker, same run.

    make bench-transport
    (or: infra/with-stack.sh .venv/bin/python bench/transport_bench.py)
    options: --tasks N (2000) --rounds R (3)

For each transport and for 1 and 3 worker processes (threads pool, 4 threads, prefetch 4, acks
late): start the workers, wait until each has consumed a warm-up task, publish N no-op tasks and
time until all have run. Prints throughput per round, medians and the ratio. Then the kill
test: 3 workers, N tasks of 10 ms, SIGKILL one worker a third of the way in, and count tasks
lost (never run) and duplicate deliveries (absorbed by the task's idempotency key).

The stock transport runs as shipped (one partition per topic) with the short waits of
STOCK_OPTIONS, and with 12 partitions when named "stock-12p".
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psycopg
from celery import Celery

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import kombu_kafka  # noqa: E402  (needs ROOT on sys.path when run as a script)

kombu_kafka.register()
DSN = "postgresql://jobweaver@127.0.0.1:54329/jobweaver_bench_transport"
BOOTSTRAP = "127.0.0.1:19092"
LOG_DIR = ROOT / ".devdata" / "bench-logs"

# The stock transport gets the same short waits we run it with elsewhere: 1 s poll wait (it is
# also its connect timeout, so it cannot be tiny; poll returns as soon as a message arrives) and
# a 20 ms pause after an empty poll instead of the virtual transport's default 1 s.
STOCK_OPTIONS = {"wait_time_seconds": 1.0, "polling_interval": 0.02}
TRANSPORTS = {
    "ours": ("jobweaver-kafka://" + BOOTSTRAP, {"default_partitions": 12}),
    "stock": ("confluentkafka://" + BOOTSTRAP, STOCK_OPTIONS),
    "stock-12p": ("confluentkafka://" + BOOTSTRAP, {**STOCK_OPTIONS, "num_partitions": 12}),
}


def setup_database() -> None:
    with psycopg.connect(DSN.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS jobweaver_bench_transport WITH (FORCE)")
        conn.execute("CREATE DATABASE jobweaver_bench_transport")
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE bench_runs (run_id text, key int, pid int, PRIMARY KEY (run_id, key))"
        )
        conn.execute("CREATE TABLE bench_duplicates (run_id text, key int, pid int)")


def count(run_id: str) -> tuple[int, int]:
    with psycopg.connect(DSN) as conn:
        runs = conn.execute(
            "SELECT count(*) FROM bench_runs WHERE run_id = %s", (run_id,)
        ).fetchone()[0]
        dups = conn.execute(
            "SELECT count(*) FROM bench_duplicates WHERE run_id = %s", (run_id,)
        ).fetchone()[0]
    return runs, dups


class Bench:
    def __init__(self, transport: str):
        self.transport = transport
        self.url, self.options = TRANSPORTS[transport]
        self.queue = f"bench-{uuid.uuid4().hex[:8]}-noop"
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "BENCH_BROKER_URL": self.url,
            "BENCH_TRANSPORT_OPTIONS": json.dumps(self.options),
            "BENCH_QUEUE": self.queue,
            "BENCH_DSN": DSN,
        }
        self.workers: list[subprocess.Popen] = []

    def start_worker(self) -> subprocess.Popen:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        log = open(LOG_DIR / f"{self.queue}-{len(self.workers)}.log", "wb")  # noqa: SIM115
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "bench.transport_app",
                "worker",
                "-Q",
                self.queue,
                "-P",
                "threads",
                "-c",
                "4",
                "-n",
                f"w{len(self.workers)}@%h",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "WARNING",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.workers.append(worker)
        return worker

    def publish(self, run_id: str, n: int, work_ms: float = 0, first_key: int = 0) -> None:
        """Send n tasks from this process, as a client of the transport under test would."""
        app = Celery("bench-publisher", broker=self.url)
        app.conf.broker_transport_options = self.options
        try:
            with app.producer_or_acquire() as producer:
                for key in range(first_key, first_key + n):
                    # Keyed like run-job messages (by job id), so they spread over partitions.
                    app.send_task(
                        "bench.noop",
                        args=[run_id, key, work_ms],
                        queue=self.queue,
                        routing_key=self.queue,
                        producer=producer,
                        headers={"kafka_key": f"{run_id}-{key}"},
                    )
                confirm = getattr(producer.channel, "confirm_deliveries", None)
                if confirm:  # ours: one confirmation for the batch
                    confirm()
        finally:
            app.close()

    def wait_until(self, run_id: str, n: int, *, stall_seconds: float = 30) -> tuple[int, int]:
        """Wait until n tasks ran, or no progress for stall_seconds; returns (ran, dups)."""
        last, last_change = -1, time.monotonic()
        while True:
            ran, dups = count(run_id)
            if ran >= n:
                return ran, dups
            if ran != last:
                last, last_change = ran, time.monotonic()
            elif time.monotonic() - last_change > stall_seconds:
                return ran, dups
            time.sleep(0.05)

    def warm_up(self) -> None:
        """Until every worker has run warm-up tasks: the group has formed and every member owns
        partitions, so no rebalance falls into the measurement. (With one partition, as the
        stock transport creates, only one worker can ever run anything.)"""
        run_id = f"warmup-{uuid.uuid4().hex[:6]}"
        deadline = time.monotonic() + 120
        target = 1 if self.transport == "stock" else len(self.workers)
        sent = 0
        while time.monotonic() < deadline:
            self.publish(run_id, 24, first_key=sent)
            sent += 24
            self.wait_until(run_id, sent, stall_seconds=30)
            with psycopg.connect(DSN) as conn:
                pids = conn.execute(
                    "SELECT count(DISTINCT pid) FROM bench_runs WHERE run_id = %s", (run_id,)
                ).fetchone()[0]
            if pids >= target:
                return
        raise SystemExit(f"{self.transport}: not every worker took part in the warm-up")

    def stop(self) -> None:
        for worker in self.workers:
            worker.send_signal(signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


def throughput(transport: str, workers: int, n: int) -> float:
    bench = Bench(transport)
    try:
        for _ in range(workers):
            bench.start_worker()
        bench.warm_up()
        run_id = f"{transport}-{workers}-{uuid.uuid4().hex[:6]}"
        started = time.monotonic()
        bench.publish(run_id, n)
        ran, _ = bench.wait_until(run_id, n)
        elapsed = time.monotonic() - started
        if ran < n:
            print(f"  {transport} x{workers}: only {ran} of {n} ran (stalled)")
        return ran / elapsed
    finally:
        bench.stop()


def kill_test(transport: str, n: int, work_ms: float) -> dict:
    bench = Bench(transport)
    try:
        for _ in range(3):
            bench.start_worker()
        bench.warm_up()
        run_id = f"kill-{transport}-{uuid.uuid4().hex[:6]}"
        bench.publish(run_id, n, work_ms=work_ms)
        while count(run_id)[0] < n // 3:
            time.sleep(0.02)
        # The victim: the worker that has run the most tasks of this burst (it holds work).
        with psycopg.connect(DSN) as conn:
            busiest = conn.execute(
                "SELECT pid FROM bench_runs WHERE run_id = %s GROUP BY pid "
                "ORDER BY count(*) DESC LIMIT 1",
                (run_id,),
            ).fetchone()[0]
        victim = next(w for w in bench.workers if w.pid == busiest)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        # Longer than any consumer session timeout (librdkafka's default is 45 s), so a stall
        # means the tasks are really gone, not that the group is still rebalancing.
        ran, dups = bench.wait_until(run_id, n, stall_seconds=75)
        return {"lost": n - ran, "duplicate_deliveries": dups}
    finally:
        bench.stop()


def commit_probe(transport: str) -> int:
    """Receive 3 messages (prefetch 3), ack only the first: which offset did the transport
    commit? Anything above 1 covers unfinished messages that a crash would lose."""
    import contextlib

    from confluent_kafka import Consumer, TopicPartition
    from kombu import Connection, Queue

    url, options = TRANSPORTS[transport]
    queue = f"bench-{uuid.uuid4().hex[:8]}-probe"
    group = f"{queue}-consumer-group"  # the stock transport's fixed naming
    # One partition, so the three messages are in order on partition 0.
    probe_options = {**options, "group_id": group, "default_partitions": 1, "num_partitions": 1}
    with Connection(url, transport_options=probe_options) as conn:
        producer = conn.Producer()
        for body in ("m1", "m2", "m3"):
            producer.publish(
                body,
                routing_key=queue,
                exchange="",
                serializer="json",
                declare=[Queue(queue, routing_key=queue)],
            )
        confirm = getattr(producer.channel, "confirm_deliveries", None)
        if confirm:
            confirm()
    received = []
    with Connection(url, transport_options=probe_options) as conn:
        consumer = conn.Consumer(
            Queue(queue, routing_key=queue),
            accept=["json"],
            callbacks=[lambda body, message: received.append(message)],
        )
        consumer.qos(prefetch_count=3)
        consumer.consume()
        deadline = time.monotonic() + 60
        while len(received) < 3 and time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                conn.drain_events(timeout=1)
        received[0].ack()
        commit_now = getattr(consumer.channel, "commit_now", None)
        if commit_now:
            commit_now()
        time.sleep(1)  # let an asynchronous commit (the stock transport's) reach the broker
        reader = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group})
        try:
            return reader.committed([TopicPartition(queue, 0)], timeout=10)[0].offset
        finally:
            reader.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--transports", default="ours,stock")
    parser.add_argument("--kill-tasks", type=int, default=600)
    parser.add_argument("--kill-work-ms", type=float, default=200)
    parser.add_argument("--kill-only", action="store_true")
    args = parser.parse_args()
    setup_database()
    transports = args.transports.split(",")
    results: dict[tuple[str, int], list[float]] = {}
    for round_number in range(1, 0 if args.kill_only else args.rounds + 1):
        for transport in transports:
            for workers in (1, 3):
                rate = throughput(transport, workers, args.tasks)
                results.setdefault((transport, workers), []).append(rate)
                print(
                    f"round {round_number}: {transport:9s} x{workers}: {rate:8.0f} tasks/s",
                    flush=True,
                )
    if results:
        print_throughput(results, args)
    print("\ncommit check: 3 messages received, only the first acked; committed offset:")
    for transport in transports:
        offset = commit_probe(transport)
        verdict = "correct" if offset == 1 else f"covers {offset - 1} unfinished message(s)"
        print(f"  {transport:9s}: {offset} ({verdict})", flush=True)
    print(
        f"\nkill test: 3 workers, {args.kill_tasks} tasks of {args.kill_work_ms:g} ms, SIGKILL of "
        "the busiest worker a third of the way through:"
    )
    for transport in transports:
        outcome = kill_test(transport, args.kill_tasks, args.kill_work_ms)
        print(
            f"  {transport:9s}: lost {outcome['lost']}, duplicate deliveries "
            f"{outcome['duplicate_deliveries']} (ran twice: 0, absorbed by the task's key)",
            flush=True,
        )


def print_throughput(results: dict, args) -> None:
    print(f"\nthroughput, median of {args.rounds} rounds, {args.tasks} no-op tasks:")
    medians = {key: statistics.median(rates) for key, rates in results.items()}
    for (transport, workers), rate in sorted(medians.items()):
        print(f"  {transport:9s} x{workers}: {rate:8.0f} tasks/s")
    for workers in (1, 3):
        if ("ours", workers) in medians and ("stock", workers) in medians:
            ratio = medians[("ours", workers)] / medians[("stock", workers)]
            print(f"  ratio ours/stock with {workers} worker(s): {ratio:.1f}x")


if __name__ == "__main__":
    main()
