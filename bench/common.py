"""A throwaway JobWeaver stack for benchmarks: its own database (jobweaver_bench, recreated),
its own topic prefix, real worker processes. Needs PostgreSQL and Kafka up (infra/stack.sh)."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BENCH_DB = "jobweaver_bench"


def configure(*, database: str = BENCH_DB, **overrides: str) -> None:
    """Set the benchmark's environment, then set up Django. Call once, before anything else.
    `database` (recreated) defaults to the shared jobweaver_bench; a benchmark that may run
    beside another one passes a name of its own (and drops it with `drop_database`)."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "jobweaver_site.settings"
    os.environ.setdefault("DJANGO_DEBUG", "1")
    os.environ["JOBWEAVER_KAFKA_TOPIC_PREFIX"] = f"bench-{uuid.uuid4().hex[:8]}-"
    os.environ["DATABASE_URL"] = f"postgres://jobweaver@127.0.0.1:54329/{database}"
    os.environ["JOBWEAVER_LOG_LEVEL"] = "WARNING"
    os.environ.update(overrides)
    _recreate_database(database)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    # Statistics, as a database in service has them: costed on guesses, a statement's first
    # plans kept its generic plan out for good once autovacuum analyzed (bench/NOTES.md).
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _recreate_database(name: str = BENCH_DB) -> None:
    drop_database(name)
    import psycopg

    with psycopg.connect(
        "postgresql://jobweaver@127.0.0.1:54329/postgres", autocommit=True
    ) as conn:
        conn.execute(f"CREATE DATABASE {name}")


def drop_database(name: str) -> None:
    import psycopg

    with psycopg.connect(
        "postgresql://jobweaver@127.0.0.1:54329/postgres", autocommit=True
    ) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def drop_topics(prefix: str) -> int:
    """Delete this run's Kafka topics (names starting with `prefix`): each run makes a dozen
    (run-job alone has twelve partitions), and a dev broker that keeps every bench's grows by
    hundreds of partitions a day. Returns how many were deleted; best effort."""
    from confluent_kafka.admin import AdminClient
    from django.conf import settings

    admin = AdminClient({"bootstrap.servers": settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS})
    topics = [name for name in admin.list_topics(timeout=10).topics if name.startswith(prefix)]
    for future in admin.delete_topics(topics).values() if topics else ():
        try:
            future.result(timeout=30)
        except Exception as exc:  # noqa: BLE001 - a topic left behind is only clutter
            print(f"could not delete a bench topic: {exc}", file=sys.stderr)
    return len(topics)


@contextmanager
def running_stack(executors: int = 1, *, probe: bool = True):
    """Scheduler, beat and `executors` executor processes; yields once they are ready and (with
    `probe`) a probe job submitted from this process completed."""
    from django.conf import settings

    from jobweaver.core.kafka import common_config, ensure_topics
    from jobweaver.scheduler.beat import beat_schedule_setup
    from tests.stack import WorkerProcess, child_environment

    ensure_topics()
    beat_schedule_setup()
    env = child_environment()
    processes = [
        WorkerProcess("scheduler", "bench-scheduler", env),
        WorkerProcess("beat", "bench-beat", env),
    ]
    processes += [
        WorkerProcess("executor", f"bench-executor{i + 1}", env) for i in range(executors)
    ]
    try:
        for process in processes:
            process.start()
        for process in processes:
            process.wait_ready()
        if probe:
            wait_for_job(submit_steps([{"action": "LOG", "message": "probe"}]), timeout=90)
        yield processes
    finally:
        for process in processes:
            process.stop()
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(common_config())
        prefix = settings.JOBWEAVER_KAFKA_TOPIC_PREFIX
        ours = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
        if ours:
            for future in admin.delete_topics(ours, operation_timeout=10).values():
                future.result(timeout=15)


def submit_steps(steps: list[dict], **fields):
    """One job through the submission service; `fields` are further request fields (e.g.
    priority=9, maxRetryCount=2, runAt="2026-01-01T12:00:00Z")."""
    from jobweaver.jobs.services import job_submit
    from jobweaver.jobs.validation import parse_job_request

    body = {"jobType": "SIMULATION", "payload": {"steps": steps}, **fields}
    return job_submit(spec=parse_job_request(body)).job.id


def wait_for_job(job_id, *, status: str = "COMPLETED", timeout: float = 60) -> None:
    from jobweaver.scheduler.models import JobExecution

    deadline = time.monotonic() + timeout
    while JobExecution.objects.get(job_id=job_id).status != status:
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} did not reach {status} in {timeout} s")
        time.sleep(0.01)


def submit_bulk(
    steps: list[dict],
    count: int,
    *,
    run_at,
    priority: int = 5,
    max_retries: int | None = None,
) -> list:
    """`count` identical jobs due at `run_at`, through the batch submission service
    (`jobweaver.jobs.services.job_submit_batch`: bulk INSERTs of jobs, PENDING executions and
    job-created events, JOBWEAVER_MAX_BATCH_JOBS per transaction). Returns the job ids; the
    events are relayed by this process's outbox relay thread (`outbox_relay_pending` waits)."""
    from django.conf import settings

    from jobweaver.core.timeutil import iso
    from jobweaver.jobs.services import job_submit_batch
    from jobweaver.jobs.validation import parse_job_request

    body = {
        "jobType": "SIMULATION",
        "payload": {"steps": steps},
        "priority": priority,
        "runAt": iso(run_at),
    }
    if max_retries is not None:
        body["maxRetryCount"] = max_retries
    spec = parse_job_request(body)
    per_batch = settings.JOBWEAVER_MAX_BATCH_JOBS
    ids = []
    for start in range(0, count, per_batch):
        jobs = job_submit_batch(specs=[spec] * min(per_batch, count - start))
        ids += [job.id for job in jobs]
    return ids


def api_token(username: str = "bench") -> str:
    """A user allowed to submit jobs (jobs.add_job) and a fresh API token for it; returns the key
    for 'Authorization: Token <key>'."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    from jobweaver.accounts.services import api_token_create

    user, _ = get_user_model().objects.get_or_create(username=username)
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="jobweaver_jobs", codename="add_job")
    )
    return api_token_create(user=user, name=f"{username}-{uuid.uuid4().hex[:6]}").key


@contextmanager
def running_web(*, workers: int = 2, threads: int = 8, **env_overrides: str):
    """A gunicorn web process (jobweaver_site/gunicorn.conf.py) on a free port, pointed at the
    bench database and topic prefix; yields (base URL, Popen) once /healthz answers. Extra
    settings (throttle, active-jobs cap) go through `env_overrides`, i.e. its environment."""
    import subprocess
    import urllib.request

    from django.conf import settings

    from tests.stack import LOG_DIR, child_environment, free_port

    port = free_port()
    env = {
        **child_environment(),
        "JOBWEAVER_WEB_BIND": f"127.0.0.1:{port}",
        "JOBWEAVER_WEB_WORKERS": str(workers),
        "JOBWEAVER_WEB_THREADS": str(threads),
        **env_overrides,
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # gunicorn.conf.py makes a fresh one
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    log_path = LOG_DIR / f"{settings.JOBWEAVER_KAFKA_TOPIC_PREFIX}web.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [
                str(ROOT / ".venv" / "bin" / "gunicorn"),
                "-c",
                "jobweaver_site/gunicorn.conf.py",
                "--access-logfile",
                "/dev/null",
                "jobweaver_site.wsgi",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"gunicorn exited; see {log_path}")
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"gunicorn did not answer /healthz in 60 s; see {log_path}")
            time.sleep(0.1)
        yield base, process
    finally:
        import signal

        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


def rss_mib(pid: int, *, with_children: bool = False) -> float:
    """Resident set size of a process (and its direct children: gunicorn's workers), MiB."""
    pids = [pid]
    if with_children:
        children = Path(f"/proc/{pid}/task/{pid}/children")
        if children.exists():
            pids += [int(p) for p in children.read_text().split()]
    total = 0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except FileNotFoundError:
            continue
    return total / 1024


def cpu_seconds(pid: int, *, with_children: bool = False) -> float:
    """utime + stime of a process (all its threads), plus all its live descendants' when asked
    (a gunicorn master's workers, a process-pool executor's forkserver and children), plus the
    reaped children's each of them waited for (cutime + cstime), in seconds."""
    ticks = os.sysconf("SC_CLK_TCK")
    pids, seen = [pid], 0
    while with_children and seen < len(pids):
        children = Path(f"/proc/{pids[seen]}/task/{pids[seen]}/children")
        seen += 1
        with contextlib.suppress(OSError):
            pids += [int(p) for p in children.read_text().split()]
    total = 0
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rpartition(")")[2].split()
        except FileNotFoundError:
            continue
        total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / ticks


def server_pids() -> dict[str, list[int]]:
    """PIDs of the shared PostgreSQL server (postmaster: its backends' CPU lands in its
    cutime when they exit; live backends counted directly) and of the Kafka broker."""
    found: dict[str, list[int]] = {"postgres": [], "kafka": []}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmdline.startswith(("postgres", "/usr/lib/postgresql")):
            found["postgres"].append(int(proc.name))
        elif "kafka.Kafka" in cmdline:
            found["kafka"].append(int(proc.name))
    return found


class CpuMeter:
    """CPU seconds each process of a system used between `start` and `stop`, by role: the
    processes named in `roles` (name -> (pid, count its descendants too)), the shared servers
    named in `servers` ("postgres", "kafka": those the system uses), and this script (the load:
    HTTP clients and polling, and the children it waited for), under SCRIPT. A role named
    "name:i" is summed under "name" (an executor role over every executor process)."""

    SCRIPT = "this script"

    def __init__(
        self,
        roles: dict[str, tuple[int, bool]],
        *,
        servers: tuple[str, ...] = ("postgres", "kafka"),
    ):
        self.roles = dict(roles)
        for name, pids in server_pids().items():
            if name in servers:
                for i, pid in enumerate(pids):
                    self.roles[f"{name}:{i}"] = (pid, False)
        self.roles[self.SCRIPT] = (os.getpid(), False)
        self.before: dict[str, float] = {}

    def _read(self) -> dict[str, float]:
        return {k: cpu_seconds(pid, with_children=c) for k, (pid, c) in self.roles.items()}

    def start(self) -> None:
        self.before = self._read()

    def stop(self) -> dict[str, float]:
        used: dict[str, float] = {}
        for key, value in self._read().items():
            role = key.split(":")[0]
            used[role] = used.get(role, 0) + value - self.before[key]
        return used


class Bar:
    """Rich progress bars on stderr, one per `add` (bench/requirements.txt); plain lines every
    5 s without rich."""

    def __init__(self):
        try:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
        except ImportError:
            self.progress = None
            return
        self.progress = Progress(
            TextColumn("{task.description:<14}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[info]}"),
            console=Console(stderr=True),
        )

    def __enter__(self) -> Bar:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.progress is not None:
            self.progress.stop()

    def add(self, name: str, total: int):
        self.last_print = 0.0
        if self.progress is None:
            return name
        return self.progress.add_task(name, total=total, info="")

    def update(self, task, done: int, info: str = "") -> None:
        if self.progress is not None:
            self.progress.update(task, completed=done, info=info)
        elif time.monotonic() - self.last_print >= 5:
            self.last_print = time.monotonic()
            print(f"  {task}: {done} {info}", file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        if self.progress is not None:
            self.progress.console.print(text)
        else:
            print(text, file=sys.stderr, flush=True)
