"""A real executor keeps its liveness file fresh; frozen (SIGSTOP) its probe fails, and it
passes again once the process runs (SIGCONT): what a Kubernetes liveness probe acts on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.stack import ROOT, wait_for

pytestmark = [pytest.mark.integration]


def probe_passes(worker) -> bool:
    env = {
        **os.environ,
        "JOBWEAVER_LIVENESS_FILE": str(worker.liveness_file),
        # Ten of the test stack's heartbeats (JOBWEAVER_WORKER_HEARTBEAT_SECONDS=0.5).
        "JOBWEAVER_LIVENESS_MAX_AGE_SECONDS": "5",
    }
    probe = [sys.executable, "-m", "jobweaver_site.workers", "probe", worker.role]
    return subprocess.run(probe, cwd=ROOT, env=env, capture_output=True, timeout=60).returncode == 0


def test_executor_probe_fails_while_frozen_and_recovers(stack):
    executor = next(worker for worker in stack.executors if worker.alive())
    scheduler = stack.scheduler
    wait_for(lambda: probe_passes(executor), timeout=30, message="a fresh executor heartbeat")
    wait_for(lambda: probe_passes(scheduler), timeout=30, message="a fresh scheduler heartbeat")
    executor.signal(signal.SIGSTOP)
    try:
        wait_for(lambda: not probe_passes(executor), timeout=30, message="the probe to fail")
    finally:
        executor.signal(signal.SIGCONT)
    wait_for(lambda: probe_passes(executor), timeout=30, message="the probe to pass again")
