"""Where a job's cost goes, in counts (issue 34 item 3): statements, transactions, round trips,
rows, index entries and Kafka records per job, by process and by statement.

    infra/with-stack.sh .venv/bin/python bench/per_job_costs.py --jobs 2000

The throwaway stack of bench/throughput.py's "ours" side (bench/common.py: a database of this
run's own, its own topic prefix; scheduler, beat, one executor of --threads threads, a gunicorn
web process). N jobs of one LOG step go through `POST /api/jobs/batch`, --per-request per
request from --clients threads, and the run ends when N job-completed events are on Kafka (this
script reads no table while the jobs run, so the tables' scan counts are the stack's alone).

Figures, each the difference of two snapshots (before: --settle quiet seconds after the warm-up
jobs; after: the processes' counts and the topics' offsets once the last job-completed event is
on Kafka, the database's statistics --settle seconds later, when every backend has flushed
them), minus the stack's background (heartbeats, beat ticks: the rate of an idle window of
--idle seconds just before the run, times the run's length), divided by N:

- by process (bench/counting/statement_counter.py, loaded into every process of the stack at
  start-up through PYTHONPATH): database statements, BEGINs, COMMITs and ROLLBACKs (each a
  round trip), transactions (BEGINs plus statements sent outside a transaction block), Kafka
  records produced, flushes and offset commits, and CPU (bench/common.py CpuMeter, from the
  first submit to the last job-completed event; indicative only on a shared machine);
- by statement: calls per job of each statement text, named by the code that sent it; and the
  notifications the dispatcher's LISTEN session received (each a server transaction);
- pg_stat_database (transactions, rows) and pg_stat_user_tables (inserts, updates, HOT updates,
  deletes, scans) of the run's database; pg_stat_statements too when the server preloads it;
- index entries written per job: each index of the execution, attempt, job and outbox tables,
  and the row versions of a job that enter it (an INSERT, or an UPDATE that is not HOT, adds
  an entry to every index whose predicate the new version satisfies: the predicates are
  evaluated on a copy of one of this run's rows set to each state the job passes through);
  the entries each index's scans read per job (idx_tup_read: dead versions' entries not yet
  vacuumed included, so this one follows autovacuum's timing and the load); and for each UPDATE
  the stack ran, the indexed columns it sets (any one makes it non-HOT);
- Kafka records per job by topic (the topics' end offsets).

Counts are per job of this run's shape: some depend on timing, not on the machine's speed
alone (how many jobs a dispatch claims, how many completions share a statement, how many events
a relay batch carries); their calls per job are printed with the jobs per call.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import (
    ROOT,
    CpuMeter,
    api_token,
    configure,
    drop_database,
    drop_topics,
    running_stack,
    running_web,
)

COUNTING = ROOT / "bench" / "counting"
RUN_ID = uuid.uuid4().hex[:8]
DATABASE = f"jobweaver_bench_costs_{RUN_ID}"
LOG_JOB = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "bench"}]}}
EXECUTIONS = "jobweaver_scheduler_jobexecution"
ATTEMPTS = "jobweaver_executor_executionattempt"
JOBS = "jobweaver_jobs_job"
OUTBOX = "jobweaver_outbox_outboxevent"
# The row versions a job of one LOG step writes in each table, as (state, overrides of the
# finished row that make it that state); the first is the INSERT, the others UPDATEs in order.
STATES = {
    EXECUTIONS: [
        (
            "insert PENDING",
            {
                "status": "'PENDING'",
                "current_event_id": "NULL",
                "lease_expires_at": "NULL",
                "dispatched_at": "NULL",
                "started_at": "NULL",
                "finished_at": "NULL",
                "worker_id": "''",
            },
        ),
        (
            "claim DISPATCHED",
            {
                "status": "'DISPATCHED'",
                "started_at": "NULL",
                "finished_at": "NULL",
                "lease_expires_at": "now()",
            },
        ),
        (
            "start RUNNING",
            {"status": "'RUNNING'", "finished_at": "NULL", "lease_expires_at": "now()"},
        ),
        ("complete COMPLETED", {}),
    ],
    ATTEMPTS: [
        ("insert RUNNING", {"outcome": "'RUNNING'", "finished_at": "NULL"}),
        ("close SUCCESS", {}),
    ],
    JOBS: [("insert", {})],
    OUTBOX: [("insert unpublished", {"published_at": "NULL"}), ("mark published", {})],
}
ROLES = ("web", "scheduler", "beat", "executor")
PG_KEYS = ("db", "table", "index", "pgss")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", "-n", type=int, default=2000, help="N (default 2000)")
    parser.add_argument("--per-request", type=int, default=100, help="jobs per request (100)")
    parser.add_argument("--clients", type=int, default=4, help="HTTP client threads (4)")
    parser.add_argument("--threads", type=int, default=4, help="executor threads (4)")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn workers (2)")
    parser.add_argument("--web-threads", type=int, default=4, help="threads per worker (4)")
    parser.add_argument(
        "--warm-up-jobs", type=int, default=400, help="untimed jobs before the snapshots (400)"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=12.0,
        help="quiet seconds before each snapshot: an idle backend flushes its statistics "
        "within 10 s (PGSTAT_IDLE_INTERVAL) (default 12)",
    )
    parser.add_argument(
        "--idle", type=float, default=15.0, help="idle window measuring the background (15 s)"
    )
    parser.add_argument(
        "--no-counting",
        action="store_true",
        help="no statement counter in the processes (CPU without its overhead; no counts "
        "by process or statement)",
    )
    parser.add_argument("--top", type=int, default=25, help="statements listed (25)")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    args = parser.parse_args(argv)
    if not 1 <= args.per_request <= 1000:
        parser.error("--per-request must be 1..1000")
    return args


# --- snapshots ----------------------------------------------------------------------------------


class Kafka:
    """End offsets of this run's topics, read with a consumer that joins no group."""

    def __init__(self):
        from confluent_kafka import Consumer
        from django.conf import settings

        self.prefix = settings.JOBWEAVER_KAFKA_TOPIC_PREFIX
        self.consumer = Consumer(
            {
                "bootstrap.servers": settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS,
                "group.id": f"bench-costs-{RUN_ID}",
                "enable.auto.commit": False,
            }
        )

    def ends(self, only: str | None = None) -> dict[str, int]:
        """{topic without the prefix: the sum of its partitions' end offsets}."""
        from confluent_kafka import TopicPartition

        ends = {}
        for name, topic in self.consumer.list_topics(timeout=10).topics.items():
            if not name.startswith(self.prefix):
                continue
            base = name[len(self.prefix) :]
            if only is not None and base != only:
                continue
            ends[base] = sum(
                self.consumer.get_watermark_offsets(
                    TopicPartition(name, partition), timeout=10, cached=False
                )[1]
                for partition in topic.partitions
            )
        return ends

    def wait(self, topic: str, target: int, *, stall_seconds: float = 120) -> None:
        last, since = -1, time.monotonic()
        while (now := self.ends(topic).get(topic, 0)) < target:
            if now != last:
                last, since = now, time.monotonic()
            elif time.monotonic() - since > stall_seconds:
                raise TimeoutError(f"{topic} stalled at {now} of {target} records")
            time.sleep(0.25)

    def close(self) -> None:
        self.consumer.close()


def pg_stat_statements_state() -> tuple[str, bool]:
    """(what the server says of pg_stat_statements, whether this run can read it)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'pg_stat_statements'"
        )
        row = cursor.fetchone()
        cursor.execute("SHOW shared_preload_libraries")
        preloaded = "pg_stat_statements" in cursor.fetchone()[0]
        if row is None:
            return "pg_stat_statements: not installed on the server", False
        if not preloaded:
            return (
                f"pg_stat_statements {row[0]}: installed, not in shared_preload_libraries "
                "(infra/stack.sh adds it only with JOBWEAVER_PG_OPTIONS): not read",
                False,
            )
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return f"pg_stat_statements {row[0]}: preloaded, read for this database", True


def pg_snapshot(statements: bool) -> dict[tuple, float]:
    """The run database's statistics, flattened: ("db", column), ("table", name, column),
    ("index", name, column), ("pgss", query, "calls" | "ms")."""
    from django.db import connection

    flat: dict[tuple, float] = {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        columns = (
            "sessions", "xact_commit", "xact_rollback", "tup_inserted", "tup_updated",
            "tup_deleted", "tup_returned", "tup_fetched", "blks_read", "blks_hit",
        )  # fmt: skip
        cursor.execute(
            f"SELECT {', '.join(columns)} FROM pg_stat_database WHERE datname = current_database()"
        )
        flat.update({("db", c): v for c, v in zip(columns, cursor.fetchone(), strict=True)})
        columns = (
            "n_tup_ins", "n_tup_upd", "n_tup_hot_upd", "n_tup_del", "seq_scan", "seq_tup_read",
            "idx_scan", "idx_tup_fetch",
        )  # fmt: skip
        cursor.execute(f"SELECT relname, {', '.join(columns)} FROM pg_stat_user_tables")
        for name, *values in cursor.fetchall():
            for column, value in zip(columns, values, strict=True):
                flat["table", name, column] = value or 0
        cursor.execute(
            "SELECT indexrelname, idx_scan, idx_tup_read, idx_tup_fetch FROM pg_stat_user_indexes"
        )
        for name, scans, read, fetched in cursor.fetchall():
            flat["index", name, "idx_scan"] = scans
            flat["index", name, "idx_tup_read"] = read
            flat["index", name, "idx_tup_fetch"] = fetched
        if statements:
            cursor.execute(
                "SELECT regexp_replace(query, '\\s+', ' ', 'g'), sum(calls), "
                "sum(total_exec_time) FROM pg_stat_statements "
                "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "GROUP BY 1"
            )
            for query, calls, ms in cursor.fetchall():
                flat["pgss", query, "calls"] = calls
                flat["pgss", query, "ms"] = ms
    return flat


def process_snapshot(directory: Path, roles: dict[int, str]) -> tuple[dict[tuple, float], dict]:
    """The counts every process of the stack wrote (statement_counter.py), by role, flattened:
    ("proc", role, key) and ("sql", role, text); and {(role, text): label}."""
    flat: dict[tuple, float] = defaultdict(float)
    labels: dict[tuple[str, str], str] = {}
    for path in directory.glob("*.json"):
        try:
            dump = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue  # being replaced: the next snapshot has it
        role = roles.get(dump["pid"]) or roles.get(dump["ppid"])
        if role is None:
            continue
        for key, value in dump["counts"].items():
            flat["proc", role, key] += value
        for text, (calls, label) in dump["sql"].items():
            flat["sql", role, text] += calls
            labels.setdefault((role, text), label)
    return flat, labels


class Snapshots:
    def __init__(self, counts_dir: Path | None, roles: dict[int, str], statements: bool):
        self.counts_dir, self.roles, self.statements = counts_dir, roles, statements
        self.kafka = Kafka()
        self.labels: dict[tuple[str, str], str] = {}

    def take(self, *, pg: bool = True, processes: bool = True) -> tuple[float, dict]:
        """The database's statistics (`pg`), and the processes' counts and the topics' end
        offsets (`processes`), at one time."""
        if processes and self.counts_dir is not None:
            time.sleep(1.5)  # every process has written its counts since the last change
        at = time.monotonic()
        flat = dict(pg_snapshot(self.statements)) if pg else {}
        if processes:
            flat.update({("kafka", topic): end for topic, end in self.kafka.ends().items()})
        if processes and self.counts_dir is not None:
            processes, labels = process_snapshot(self.counts_dir, self.roles)
            flat.update(processes)
            self.labels.update(labels)
            import statement_counter

            mine = statement_counter.snapshot()  # this script's own, to subtract
            for key, value in mine["counts"].items():
                flat["proc", "this script", key] = value
        return at, flat


def per_job(before, idle_end, after, n: int) -> tuple[dict, dict, float]:
    """(per job net of background, background per job, run seconds) for every key; this
    script's own counts are not periodic and keep no background."""
    (t0, s0), (t1, s1), (t2, s2) = before, idle_end, after
    run_seconds, idle_seconds = t2 - t1, t1 - t0
    net, background = {}, {}
    for key in set(s1) | set(s2):
        rate = 0.0
        if key in s0 and key[:2] != ("proc", "this script"):
            rate = (s1.get(key, 0) - s0.get(key, 0)) / idle_seconds
        bg = rate * run_seconds
        net[key] = (s2.get(key, 0) - s1.get(key, 0) - bg) / n
        background[key] = bg / n
    return net, background, run_seconds


# --- indexes --------------------------------------------------------------------------------------


def index_catalog(tables) -> dict[str, list[dict]]:
    """{table: [{name, definition, predicate, columns (every column the index reads, its
    predicate's included: what makes an UPDATE that sets one non-HOT)}]}."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, i.relname, pg_get_indexdef(x.indexrelid), "
            "pg_get_expr(x.indpred, x.indrelid), pg_get_expr(x.indexprs, x.indrelid), "
            "ARRAY(SELECT a.attname FROM pg_attribute a WHERE a.attrelid = x.indrelid "
            "AND a.attnum = ANY(x.indkey::int2[]) AND a.attnum > 0) "
            "FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
            "JOIN pg_class c ON c.oid = x.indrelid WHERE c.relname = ANY(%s) ORDER BY 1, 2",
            [list(tables)],
        )
        rows = cursor.fetchall()
        cursor.execute(
            "SELECT c.relname, a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "WHERE c.relname = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped",
            [list(tables)],
        )
        table_columns = defaultdict(set)
        for table, column in cursor.fetchall():
            table_columns[table].add(column)
    catalog: dict[str, list[dict]] = defaultdict(list)
    for table, name, definition, predicate, expressions, keys in rows:
        text = f"{predicate or ''} {expressions or ''}"
        mentioned = {c for c in table_columns[table] if re.search(rf"\b{re.escape(c)}\b", text)}
        catalog[table].append(
            {
                "name": name,
                "definition": definition,
                "predicate": predicate,
                "columns": sorted(set(keys) | mentioned),
            }
        )
    return catalog


def state_matches(catalog, job_id) -> dict[str, list[tuple[str, list[bool]]]]:
    """{table: [(state, [whether each index (catalog order) takes an entry of that version])]}:
    each index's predicate evaluated on a copy of one of this run's rows, set to each state."""
    from django.db import connection, transaction

    keys = {EXECUTIONS: "job_id", ATTEMPTS: "job_id", JOBS: "id", OUTBOX: "key"}
    result = {}
    with transaction.atomic(), connection.cursor() as cursor:
        for table, states in STATES.items():
            result[table] = []
            for state, overrides in states:
                cursor.execute("DROP TABLE IF EXISTS bench_version")
                # A literal, not a parameter: CREATE TABLE AS takes none under server-side binding.
                cursor.execute(
                    f"CREATE TEMP TABLE bench_version AS SELECT * FROM {table} "
                    f"WHERE {keys[table]}::text = '{uuid.UUID(str(job_id))}' LIMIT 1"
                )
                if overrides:
                    sets = ", ".join(f"{c} = {v}" for c, v in overrides.items())
                    cursor.execute(f"UPDATE bench_version SET {sets}")
                tests = ", ".join(f"({i['predicate'] or 'true'})" for i in catalog[table])
                cursor.execute(f"SELECT {tests} FROM bench_version")
                row = cursor.fetchone()
                if row is None:
                    raise RuntimeError(f"no row of {table} for job {job_id}")
                result[table].append((state, [bool(v) for v in row]))
        transaction.set_rollback(True)
    return result


_UPDATE = re.compile(r'\bUPDATE\s+"?(\w+)"?(?:\s+(?:AS\s+)?(\w+))?\s+SET\s', re.IGNORECASE)
_SET_END = re.compile(r"\s(FROM|WHERE|RETURNING)\b", re.IGNORECASE)


def updates_in(sql: str) -> list[tuple[str, list[str]]]:
    """Every UPDATE of `sql` (CTEs included): (table, the columns its SET assigns)."""
    found = []
    for match in _UPDATE.finditer(sql):
        depth, start, i, items = 0, match.end(), match.end(), []
        while i < len(sql):
            ch = sql[i]
            if ch == "'":
                i = sql.find("'", i + 1)
                if i < 0:
                    break
            elif ch in "([":
                depth += 1
            elif ch in ")]":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and ch == ",":
                items.append(sql[start:i])
                start = i + 1
            elif depth == 0 and _SET_END.match(sql, i):
                break
            i += 1
        items.append(sql[start:i])
        columns = [
            item.split("=")[0].strip().strip('"').split(".")[-1].strip('"') for item in items
        ]
        found.append((match.group(1), [c for c in columns if c]))
    return found


# --- the run ----------------------------------------------------------------------------------


class Client:
    def __init__(self, base: str, token: str):
        self.url = f"{base}/api/jobs/batch"
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.local = threading.local()

    def post(self, count: int) -> list[str]:
        import requests

        session = getattr(self.local, "session", None)
        if session is None:
            session = self.local.session = requests.Session()
        response = session.post(
            self.url, data=json.dumps({"jobs": [LOG_JOB] * count}), headers=self.headers,
            timeout=120, allow_redirects=False,
        )  # fmt: skip
        if response.status_code != 202:
            raise RuntimeError(f"batch POST: {response.status_code} {response.text[:300]}")
        return [item["jobId"] for item in response.json()["jobs"]]

    def submit(self, n: int, per_request: int, clients: int) -> list[str]:
        chunks = [min(per_request, n - i) for i in range(0, n, per_request)]
        with ThreadPoolExecutor(clients) as pool:
            return [job for ids in pool.map(self.post, chunks) for job in ids]


def code_state() -> str:
    def git(*argv: str) -> str:
        return subprocess.run(
            ["git", "-C", str(ROOT), *argv], capture_output=True, text=True, check=False
        ).stdout.rstrip()

    head = git("rev-parse", "--short", "HEAD")
    dirty = git("status", "--porcelain", "--", "apps", "jobweaver_site", "kombu_kafka")
    if not dirty:
        return f"{head} (product code clean)"
    return f"{head} + uncommitted product changes: " + ", ".join(
        line[3:] for line in dirty.splitlines()
    )


def run(args, counts_dir: Path | None) -> dict:
    from django.db import connection

    from jobweaver.scheduler.flow import live_executors

    token = api_token()
    pgss_note, pgss = pg_stat_statements_state()
    web_env = {
        "JOBWEAVER_SUBMIT_THROTTLE_RATE": str(max(1000, 10 * args.jobs)),
        "JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER": str(max(10_000, 2 * args.jobs)),
        "JOBWEAVER_SECURE_SSL_REDIRECT": "0",
    }
    out: dict = {"code": code_state(), "pgss_note": pgss_note, "n": args.jobs}
    with (
        running_stack(executors=1) as processes,
        running_web(workers=args.web_workers, threads=args.web_threads, **web_env) as (base, web),
    ):
        deadline = time.monotonic() + 90
        while not [r for r in live_executors() if r.partitions]:
            if time.monotonic() > deadline:
                raise TimeoutError("the executor did not register")
            time.sleep(0.2)
        roles = {p.pid: p.role for p in processes} | {web.pid: "web", os.getpid(): "this script"}
        snapshots = Snapshots(counts_dir, roles, pgss)
        client = Client(base, token)
        print(f"warm-up: {args.warm_up_jobs} jobs", file=sys.stderr, flush=True)
        completed = snapshots.kafka.ends("job-completed").get("job-completed", 0)
        client.submit(args.warm_up_jobs, args.per_request, args.clients)
        snapshots.kafka.wait("job-completed", completed + args.warm_up_jobs)
        connection.close()  # this script's session: no statistics of ours pending
        time.sleep(args.settle)
        before = snapshots.take()
        print(f"idle window: {args.idle:g} s", file=sys.stderr, flush=True)
        time.sleep(args.idle)
        idle_end = snapshots.take()
        connection.close()
        meter = CpuMeter(
            {**{f"{p.role}:{i}": (p.pid, True) for i, p in enumerate(processes)},
             "web": (web.pid, True)}
        )  # fmt: skip
        completed = idle_end[1].get(("kafka", "job-completed"), 0)
        load_start = os.getloadavg()
        print(f"run: {args.jobs} jobs", file=sys.stderr, flush=True)
        meter.start()
        t0 = time.monotonic()
        job_ids = client.submit(args.jobs, args.per_request, args.clients)
        snapshots.kafka.wait("job-completed", completed + args.jobs)
        out["elapsed"] = time.monotonic() - t0
        out["cpu"] = meter.stop()
        out["load"] = (load_start, os.getloadavg())
        # The processes' counts at once (their background then spans the run and not the
        # settling), the database's once every backend has flushed its statistics.
        done = snapshots.take(pg=False)
        time.sleep(args.settle)
        after = snapshots.take(processes=False)
        snapshots.kafka.close()
        net, background, run_seconds = per_job(before, idle_end, done, args.jobs)
        out.update(net=net, background=background, run_seconds=run_seconds)
        net, background, out["pg_run_seconds"] = per_job(
            *(
                (t, {k: v for k, v in s.items() if k[0] in PG_KEYS})
                for t, s in (before, idle_end, after)
            ),
            args.jobs,
        )
        out["net"].update(net)
        out["background"].update(background)
        out["labels"] = snapshots.labels
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT count(*) FROM {EXECUTIONS} WHERE status = 'COMPLETED' "
                "AND job_id = ANY(%s::uuid[])",
                [job_ids],
            )
            out["completed"] = cursor.fetchone()[0]
        catalog = index_catalog(STATES)
        out["catalog"] = catalog
        out["states"] = state_matches(catalog, job_ids[-1])
    return out


# --- the report -----------------------------------------------------------------------------------


def _table(header: list[str], rows: list[list[str]], aligns: str | None = None) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    aligns = aligns or "l" + "r" * (len(header) - 1)

    def line(cells) -> str:
        align = {"l": str.ljust, "c": str.center, "r": str.rjust}
        return "  ".join(
            align[a](str(c), w) for c, w, a in zip(cells, widths, aligns, strict=True)
        ).rstrip()

    print(line(header))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line(row))


def _f(value: float, digits: int = 2) -> str:
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


_TABLE_WORDS = re.compile(r'\b(?:FROM|JOIN|UPDATE|INTO)\s+"?(\w+)"?', re.IGNORECASE)


def sql_summary(text: str) -> str:
    """The statement's verb and the tables it names, short."""
    verb = (text.lstrip().split(None, 1) or ["?"])[0].upper()
    if verb == "WITH":
        writes = re.findall(r"\b(UPDATE|INSERT|DELETE)\b", text, re.IGNORECASE)
        verb = "WITH " + "+".join(dict.fromkeys(w.upper() for w in writes)) if writes else verb
    tables = []
    for name in _TABLE_WORDS.findall(text):
        if name.startswith("jobweaver_") or name.startswith("auth") or name.startswith("django"):
            short = name.removeprefix("jobweaver_")
            if short not in tables:
                tables.append(short)
    if not tables:  # no table of ours: what it is
        return " ".join(text.split())[:48]
    return f"{verb} {', '.join(tables)}".strip()


def report(args, out: dict) -> None:
    net, background, n = out["net"], out["background"], out["n"]
    cpu = out["cpu"]
    print(f"\nper_job_costs: {n} one-LOG jobs, {out['completed']} COMPLETED; code {out['code']}")
    print(
        f"run {out['elapsed']:.1f} s ({n / out['elapsed']:.0f} jobs/s), load "
        + " -> ".join("/".join(f"{x:.2f}" for x in load) for load in out["load"])
        + f"; web {args.web_workers}x{args.web_threads}, executor 1x{args.threads}, "
        f"{args.per_request} jobs per request"
    )

    def proc(role: str, key: str) -> float:
        return net.get(("proc", role, key), 0.0)

    if not args.no_counting:
        print("\n1. Per job, by process (round trips = statements + BEGIN + COMMIT + ROLLBACK;")
        print("   transactions = BEGINs + statements outside a transaction block)")
        rows = []
        totals = defaultdict(float)
        for role in ROLES:
            kafka_out = sum(
                v
                for k, v in net.items()
                if k[:2] == ("proc", role) and k[2].startswith("kafka.produce")
            )
            values = {
                "statements": proc(role, "db.statements"),
                "begin": proc(role, "db.begin"),
                "commit": proc(role, "db.commit") + proc(role, "db.rollback"),
                "transactions": proc(role, "db.begin") + proc(role, "db.autocommit_statements"),
                "kafka out": kafka_out,
                "flush": proc(role, "kafka.flush"),
                "commit k": proc(role, "kafka.commit sync") + proc(role, "kafka.commit async"),
                "sessions": proc(role, "db.connect"),
                "cpu": cpu.get(role, 0.0) * 1000 / n,
            }
            values["round trips"] = values["statements"] + values["begin"] + values["commit"]
            for key, value in values.items():
                if role != "beat" or key == "cpu":
                    totals[key] += value
            rows.append([role, *(_f(values[k]) for k in PROC_COLUMNS)])
        rows.append(["total", *(_f(totals[k]) for k in PROC_COLUMNS)])
        _table(["process", *PROC_HEADERS], rows)
        print(
            "   total: without the beat's counts (its work is driven by time, not by jobs: what"
            " is left after\n   the idle rate's subtraction is noise); its CPU included"
        )
        for server in ("postgres", "kafka"):
            print(f"   CPU {server}: {cpu.get(server, 0) * 1000 / n:.2f} ms/job", end="")
        print("  (shared servers; all CPU indicative on a shared machine)")
        mine = proc("this script", "db.begin") + proc("this script", "db.autocommit_statements")
        bg_tx = sum(background.get(("proc", r, "db.begin"), 0) for r in ROLES) + sum(
            background.get(("proc", r, "db.autocommit_statements"), 0) for r in ROLES
        )
        bg_st = sum(background.get(("proc", r, "db.statements"), 0) for r in ROLES)
        print(
            f"   background subtracted (the idle window's rate x {out['run_seconds']:.1f} s): "
            f"{bg_st:.3f} statements and {bg_tx:.3f} transactions per job; "
            f"this script's own transactions: {mine:.3f}/job (not counted)"
        )
        rates = ", ".join(
            f"{r} {background.get(('proc', r, 'db.statements'), 0) * n / out['run_seconds']:.1f}"
            for r in ROLES
        )
        print(f"   idle statements per second: {rates}; the busiest:")
        idle = sorted(
            (
                (v * n / out["run_seconds"], k[1], out["labels"].get((k[1], k[2]), "?"), k[2])
                for k, v in background.items()
                if k[0] == "sql" and k[1] in ROLES and v > 0
            ),
            reverse=True,
        )
        for rate, role, label, text in idle[:6]:
            print(
                f"     {rate:5.1f}/s {role:<9} {sql_summary(text)[:40]:<40} {_short_label(label)}"
            )

    else:
        print(
            "\n1. CPU ms per job (no statement counter): "
            + ", ".join(
                f"{role} {cpu.get(role, 0.0) * 1000 / n:.2f}"
                for role in (*ROLES, "postgres", "kafka")
            )
        )

    db = {k[1]: v for k, v in net.items() if k[0] == "db"}
    print(
        "\n2. pg_stat_database per job: transactions "
        f"{db['xact_commit'] + db['xact_rollback']:.2f} (rollbacks {db['xact_rollback']:.2f}), "
        f"rows inserted {db['tup_inserted']:.2f}, updated {db['tup_updated']:.2f}, deleted "
        f"{db['tup_deleted']:.2f}, returned {db['tup_returned']:.0f}, fetched "
        f"{db['tup_fetched']:.1f}, blocks hit {db['blks_hit']:.0f} read {db['blks_read']:.2f}, "
        f"sessions {db['sessions']:.3f}"
    )
    if not args.no_counting:
        stack_tx = (
            sum(proc(r, "db.begin") + proc(r, "db.autocommit_statements") for r in ROLES)
            + proc("this script", "db.begin")
            + proc("this script", "db.autocommit_statements")
        )
        notified = sum(proc(r, "db.notifications received") for r in ROLES)
        print(
            f"   (the processes' own count: {stack_tx:.2f}; notifications received by LISTEN "
            f"sessions {notified:.2f}: PostgreSQL 15 reads each delivery of them in a\n"
            "   transaction of the listening backend's own; the rest: autovacuum, analyze)"
        )
        idle_pg = (
            (background.get(("db", "xact_commit"), 0) + background.get(("db", "xact_rollback"), 0))
            * n
            / out["pg_run_seconds"]
        )
        idle_processes = (
            sum(
                background.get(("proc", r, "db.begin"), 0)
                + background.get(("proc", r, "db.autocommit_statements"), 0)
                for r in ROLES
            )
            * n
            / out["run_seconds"]
        )
        print(
            f"   idle transactions per second: pg_stat_database {idle_pg:.1f}, the processes "
            f"{idle_processes:.1f} (subtracted over {out['pg_run_seconds']:.1f} s)"
        )

    print("\n3. Per job by table (pg_stat_user_tables; HOT = heap-only: no index entry written)")
    tables = sorted({k[1] for k in net if k[0] == "table"})
    rows = []
    for table in tables:
        v = {c: net.get(("table", table, c), 0.0) for c in TABLE_COLUMNS}
        if max(abs(x) for x in v.values()) < 0.005:
            continue
        hot = f"{100 * v['n_tup_hot_upd'] / v['n_tup_upd']:.0f}%" if v["n_tup_upd"] > 0.005 else "-"
        rows.append(
            [table.removeprefix("jobweaver_"), *(_f(v[c]) for c in TABLE_COLUMNS[:3]), hot,
             *(_f(v[c]) for c in TABLE_COLUMNS[3:])]
        )  # fmt: skip
    _table(["table", "ins", "upd", "hot upd", "HOT", "del", "seq scans", "idx scans"], rows)

    print("\n4. Index entries written per job (INSERTs and non-HOT UPDATEs x the indexes whose")
    print("   predicate the new version satisfies; x = an entry of that version); read/job: the")
    print(
        "   entries scans returned (idx_tup_read), dead versions' entries not yet vacuumed included"
    )
    total_entries = 0.0
    out["entries"] = {}
    for table, states in out["states"].items():
        catalog = out["catalog"][table]
        inserts = net.get(("table", table, "n_tup_ins"), 0.0)
        cold = net.get(("table", table, "n_tup_upd"), 0.0) - net.get(
            ("table", table, "n_tup_hot_upd"), 0.0
        )
        # Versions per job in each state: the INSERT, one UPDATE per later state (fewer, evenly,
        # when some were HOT), any further non-HOT UPDATEs (a held delivery's lease) counted in
        # the first UPDATE state.
        updates = len(states) - 1
        weights = [inserts] + [min(1.0, cold / updates) if updates else 0.0] * updates
        if updates:
            weights[1] += max(cold - updates, 0.0)
        per_index = [
            sum(w for w, (_, m) in zip(weights, states, strict=True) if m[i])
            for i in range(len(catalog))
        ]
        entries = sum(per_index)
        total_entries += entries
        out["entries"][table] = entries
        print(
            f"\n   {table}: {entries:.2f} entries/job ({inserts:.2f} inserts, {cold:.2f} "
            f"non-HOT updates per job)"
        )
        header = [
            "index",
            *(s for s, _ in states),
            "entries",
            "scans/job",
            "read/job",
            "definition",
        ]
        rows = []
        for i, index in enumerate(catalog):
            scans = net.get(("index", index["name"], "idx_scan"), 0.0)
            read = net.get(("index", index["name"], "idx_tup_read"), 0.0)
            definition = index["definition"].split(" USING ", 1)[-1]
            rows.append(
                [index["name"], *("x" if m[i] else "." for _, m in states),
                 _f(per_index[i]), _f(scans), _f(read, 1), definition]
            )  # fmt: skip
        _table(header, rows, "l" + "c" * len(states) + "rrrl")
    print(f"\n   all four tables: {total_entries:.2f} index entries per job")

    if not args.no_counting:
        report_updates(out)
        report_statements(args, out)
        report_kafka_calls(out)
    print("\n7. Kafka records per job by topic (end offsets)")
    rows = [
        [topic, _f(value, 3)] for (kind, topic), value in
        sorted((k, v) for k, v in net.items() if k[0] == "kafka") if abs(value) >= 0.0005
    ]  # fmt: skip
    _table(["topic", "records/job"], rows)
    print(f"\n8. {out['pgss_note']}")
    pgss = sorted(
        ((k[1], v, net.get(("pgss", k[1], "ms"), 0.0)) for k, v in net.items()
         if k[0] == "pgss" and k[2] == "calls" and v > 0.005),
        key=lambda row: -row[2],
    )  # fmt: skip
    if pgss:
        _table(
            ["calls/job", "ms/job", "statement"],
            [[_f(c), _f(ms, 3), q[:110]] for q, c, ms in pgss[: args.top]],
            "rrl",
        )


PROC_COLUMNS = (
    "statements", "begin", "commit", "round trips", "transactions", "sessions", "kafka out",
    "flush", "commit k", "cpu",
)  # fmt: skip
PROC_HEADERS = (
    "statements", "BEGIN", "COMMIT/RB", "DB round trips", "transactions", "new sessions",
    "Kafka records", "flushes", "offset commits", "CPU ms",
)  # fmt: skip
TABLE_COLUMNS = ("n_tup_ins", "n_tup_upd", "n_tup_hot_upd", "n_tup_del", "seq_scan", "idx_scan")


def _statements(out: dict) -> dict[tuple[str, str], dict]:
    """Calls per job of each statement (by process, label and shape), with its texts."""
    grouped: dict[tuple[str, str, str], dict] = {}
    for key, value in out["net"].items():
        if key[0] != "sql" or key[1] not in ROLES:
            continue
        _, role, text = key
        label = out["labels"].get((role, text), "?")
        entry = grouped.setdefault((role, label, sql_summary(text)), {"calls": 0.0, "texts": []})
        entry["calls"] += value
        entry["texts"].append(text)
    return grouped


def report_updates(out: dict) -> None:
    print("\n5. The UPDATEs the stack ran, and the indexed columns each sets (any one: not HOT)")
    indexed = {
        table: {c for index in catalog for c in index["columns"]}
        for table, catalog in out["catalog"].items()
    }
    rows = []
    for (role, label, _), entry in sorted(_statements(out).items(), key=lambda kv: -kv[1]["calls"]):
        if entry["calls"] < 0.005:
            continue
        seen = set()
        for text in entry["texts"]:
            for table, columns in updates_in(text):
                if table not in indexed or (table, tuple(columns)) in seen:
                    continue
                seen.add((table, tuple(columns)))
                blocking = [c for c in columns if c in indexed[table]]
                rows.append(
                    [role, _f(entry["calls"]), table.removeprefix("jobweaver_"),
                     ", ".join(blocking) or "none: HOT if the page has room",
                     ", ".join(c for c in columns if c not in indexed[table]),
                     _short_label(label)]
                )  # fmt: skip
    _table(
        ["process", "calls/job", "table", "indexed columns set", "other columns set", "code"],
        rows,
        "lrllll",
    )


def _short_label(label: str) -> str:
    return label.replace("apps/", "").replace(".py:", ":")


def report_statements(args, out: dict) -> None:
    print(f"\n6. Statements per job by statement (top {args.top}; jobs/call = 1 / calls per job)")
    grouped = sorted(_statements(out).items(), key=lambda kv: -kv[1]["calls"])
    rows = []
    for (role, label, summary), entry in grouped[: args.top]:
        calls = entry["calls"]
        if calls < 0.0005:
            break
        rows.append(
            [role, _f(calls, 3), f"{1 / calls:.1f}" if calls > 0 else "-", summary[:48],
             _short_label(label)[:90]]
        )  # fmt: skip
    _table(["process", "calls/job", "jobs/call", "statement", "code"], rows, "lrrll")
    left = sum(e["calls"] for _, e in grouped[args.top :])
    if left > 0.0005:
        print(f"   ... {len(grouped) - args.top} more statements, {left:.3f} calls/job in all")


def report_kafka_calls(out: dict) -> None:
    net = out["net"]
    print("\n   Kafka client calls per job by process (statement_counter.py)")
    rows = []
    for role in ROLES:
        calls = {
            k[2]: v for k, v in net.items() if k[:2] == ("proc", role) and k[2].startswith("kafka")
        }
        for name, value in sorted(calls.items()):
            if abs(value) >= 0.0005:
                rows.append([role, name.removeprefix("kafka."), _f(value, 3)])
    _table(["process", "call", "per job"], rows, "llr")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    counts_dir = None
    if not args.no_counting:
        counts_dir = Path(tempfile.mkdtemp(prefix="bench-counts-"))
        os.environ["BENCH_COUNTS_DIR"] = str(counts_dir)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(COUNTING), str(ROOT), os.environ.get("PYTHONPATH")) if p
        )
        sys.path.insert(0, str(COUNTING))
        import statement_counter

        statement_counter.install(kafka=False)  # this script's statements, to subtract
    configure(
        database=DATABASE,
        JOBWEAVER_EXECUTOR_CONCURRENCY=str(args.threads),
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="bench-only-" + uuid.uuid4().hex,
    )
    try:
        out = run(args, counts_dir)
        report(args, out)
        if args.json:
            serial = {
                k: v for k, v in out.items() if k not in ("net", "background", "labels", "states")
            }
            serial["per_job"] = {" | ".join(map(str, k)): v for k, v in out["net"].items()}
            serial["background_per_job"] = {
                " | ".join(map(str, k)): v for k, v in out["background"].items()
            }
            args.json.write_text(json.dumps(serial, indent=1, default=str))
        return 0 if out["completed"] == args.jobs else 1
    finally:
        from django.db import connections

        drop_topics(os.environ["JOBWEAVER_KAFKA_TOPIC_PREFIX"])
        connections.close_all()
        drop_database(DATABASE)
        if counts_dir is not None:
            shutil.rmtree(counts_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
