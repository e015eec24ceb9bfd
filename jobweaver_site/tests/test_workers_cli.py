"""The worker entry point as compose and Kubernetes run it: each role's command loads with
--dry-run, and `probe ROLE` is a liveness probe over the role's heartbeat file."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.stack import ROOT


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jobweaver_site.workers", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("role", ["executor", "scheduler", "beat"])
def test_each_role_loads_and_prints_its_celery_command(role):
    done = run(role, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("celery beat" if role == "beat" else "celery worker")


@pytest.mark.parametrize("role", ["executor", "scheduler", "beat"])
def test_each_role_logs_at_the_configured_level(role):
    # Celery sets the root logger's level from --loglevel: a worker at a fixed INFO ignored
    # JOBWEAVER_LOG_LEVEL and logged every job's dispatch and outcome.
    quiet = run(role, "--dry-run", env={"JOBWEAVER_LOG_LEVEL": "warning"})
    default = run(role, "--dry-run", env={"JOBWEAVER_LOG_LEVEL": ""})
    assert quiet.returncode == 0, quiet.stderr
    assert "--loglevel WARNING" in quiet.stdout
    assert "--loglevel INFO" in default.stdout


def test_help_and_an_unknown_role():
    assert "probe" in run("--help").stdout
    assert run("executor", "--help").returncode == 0
    unknown = run("nope")
    assert unknown.returncode == 2 and "probe" in unknown.stderr


def test_probe_is_alive_only_while_the_heartbeat_file_is_fresh(tmp_path):
    heartbeat = tmp_path / "executor.alive"
    env = {"JOBWEAVER_LIVENESS_FILE": str(heartbeat), "JOBWEAVER_LIVENESS_MAX_AGE_SECONDS": "60"}
    missing = run("probe", "executor", env=env)
    assert missing.returncode == 1 and "no heartbeat file" in missing.stderr
    heartbeat.touch()
    assert run("probe", "executor", env=env).returncode == 0
    stale = time.time() - 61
    os.utime(heartbeat, (stale, stale))
    old = run("probe", "executor", env=env)
    assert old.returncode == 1 and "last heartbeat" in old.stderr
