"""Submit→RUNNING latency of single jobs on an idle stack (the fast path after commit).

    make bench-latency            (or: infra/with-stack.sh .venv/bin/python bench/submit_latency.py)

Submits N one-step jobs one at a time, each after the previous completed, and prints the time
from calling the submission service to the execution's started_at (both on this machine's
clock), plus submit→COMPLETED. Quote medians: the machine is noisy.
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import UTC, datetime

from common import configure, running_stack, submit_steps, wait_for_job

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20


def main() -> None:
    configure()
    from apps.scheduler.models import JobExecution

    to_running, to_completed = [], []
    with running_stack(executors=1):
        for _ in range(N):
            submitted = datetime.now(UTC)
            t0 = time.monotonic()
            job_id = submit_steps([{"action": "LOG", "message": "latency probe"}])
            wait_for_job(job_id, timeout=30)
            to_completed.append(time.monotonic() - t0)
            started = JobExecution.objects.get(job_id=job_id).started_at
            to_running.append((started - submitted).total_seconds())
    ms = lambda xs: ", ".join(f"{x * 1000:.0f}" for x in xs)  # noqa: E731
    print(f"jobs: {N}")
    print(
        f"submit→RUNNING   median {statistics.median(to_running) * 1000:.1f} ms "
        f"(min {min(to_running) * 1000:.1f}, max {max(to_running) * 1000:.1f})"
    )
    print(f"submit→COMPLETED median {statistics.median(to_completed) * 1000:.1f} ms")
    print(f"all submit→RUNNING (ms): {ms(to_running)}")


if __name__ == "__main__":
    main()
