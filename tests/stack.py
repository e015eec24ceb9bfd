"""Real worker processes for integration tests: executor(s), scheduler and beat, started once
per test session against the test database and the session's topic prefix."""

from __future__ import annotations

import ast
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
LOG_DIR = ROOT / ".devdata" / "test-logs"


def skip_or_fail_without(tool: str, reason: str):
    """A test that needs an external tool skips when it is missing — except under `make test`
    (JOBWEAVER_REQUIRE_TEST_TOOLS=1), which installs every tool first: there a missing tool is
    a failure, so the suite can never pass by silently skipping."""
    import pytest

    if os.environ.get("JOBWEAVER_REQUIRE_TEST_TOOLS") == "1":
        pytest.fail(f"{tool} is required under make test: {reason}")
    pytest.skip(reason)


def wait_for(
    condition: Callable[[], object],
    *,
    timeout: float,
    interval: float = 0.05,
    message: str = "condition",
) -> object:
    """Poll `condition` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}")
        time.sleep(interval)


def child_environment() -> dict[str, str]:
    """The environment of this process, pointed at the database Django uses right now (the
    test database inside a test session)."""
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "jobweaver_site.settings_test")
    env["DATABASE_URL"] = f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1 (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class WorkerProcess:
    def __init__(
        self,
        role: str,
        name: str,
        env: dict[str, str] | None = None,
        *,
        module: str = "jobweaver_site.workers",
    ):
        self.role, self.name, self.env, self.module = role, name, env, module
        self.log_path = LOG_DIR / f"{settings.JOBWEAVER_KAFKA_TOPIC_PREFIX}{name}.log"
        self.process: subprocess.Popen | None = None
        self.metrics_port: int | None = None

    def start(self) -> WorkerProcess:
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its lifetime
        argv = [sys.executable, "-m", self.module, self.role]
        if self.role != "beat":
            argv.append(f"{self.name}@%h")
        env = dict(child_environment() if self.env is None else self.env)
        # Each worker process serves its Prometheus metrics on a port of its own.
        env.setdefault("JOBWEAVER_METRICS_PORT", str(free_port()))
        self.metrics_port = int(env["JOBWEAVER_METRICS_PORT"])
        # And touches a liveness file of its own (many workers share this machine).
        env.setdefault("JOBWEAVER_LIVENESS_FILE", str(self.log_path.with_suffix(".alive")))
        self.liveness_file = Path(env["JOBWEAVER_LIVENESS_FILE"])
        self.started_at = time.time()
        self.process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def assigned_partitions(self) -> set[tuple[str, int]]:
        """Partitions this worker's consumer owns now, from the transport's log lines."""
        owned: set[tuple[str, int]] = set()
        for line in self.log_text().splitlines():
            for verb, add in (("assigned [", True), ("revoked [", False), ("lost [", False)):
                if verb in line:
                    partitions = ast.literal_eval(line[line.index(verb) + len(verb) - 1 :])
                    for partition in partitions:
                        (owned.add if add else owned.discard)(tuple(partition))
        return owned

    def wait_ready(self, timeout: float = 60) -> None:
        def ready():
            if not self.alive():
                raise AssertionError(f"{self.name} exited:\n{self.log_text()[-3000:]}")
            if self.role == "beat":
                # Beat touches its liveness file when it starts (beat_init); its own "beat:
                # Starting" line is an INFO line, gone under JOBWEAVER_LOG_LEVEL=WARNING.
                return self._touched_since_start() or "beat: Starting" in self.log_text()
            return " ready." in self.log_text()

        wait_for(ready, timeout=timeout, message=f"{self.name} to start")

    def _touched_since_start(self) -> bool:
        try:
            return self.liveness_file.stat().st_mtime >= self.started_at
        except FileNotFoundError:
            return False

    def signal(self, signum: int) -> None:
        if self.alive():
            os.kill(self.pid, signum)

    def stop(self, timeout: float = 15) -> None:
        stop_together([self], timeout)


def stop_together(workers, timeout: float = 15) -> None:
    """SIGTERM to every live one of `workers` at once, then wait for each, SIGKILL after
    `timeout`: a worker's warm shutdown takes seconds (its Kafka consumer leaves the group),
    and stopped one after another, a fixture's four executors took 12 s."""
    live = [worker for worker in workers if worker.alive()]
    for worker in live:
        worker.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for worker in live:
        try:
            worker.process.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            worker.signal(signal.SIGKILL)
            worker.process.wait(10)
