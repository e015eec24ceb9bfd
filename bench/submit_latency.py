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

    to_running, to_completed, split = [], [], []
    with running_stack(executors=1):
        for _ in range(N):
            submitted = datetime.now(UTC)
            t0 = time.monotonic()
            job_id = submit_steps([{"action": "LOG", "message": "latency probe"}])
            wait_for_job(job_id, timeout=30)
            to_completed.append(time.monotonic() - t0)
            execution = JobExecution.objects.get(job_id=job_id)
            started = execution.started_at
            to_running.append((started - submitted).total_seconds())
            split.append(
                (
                    (execution.dispatched_at - submitted).total_seconds(),
                    (started - execution.dispatched_at).total_seconds(),
                )
            )
        # The probe of running_stack: the first job after the stack started (database times).
        probe = JobExecution.objects.select_related("job").order_by("job__created_at").first()
    ms = lambda xs: ", ".join(f"{x * 1000:.0f}" for x in xs)  # noqa: E731
    print(f"jobs: {N}")
    p50, p95, p99 = (
        statistics.quantiles(to_running, n=100, method="inclusive")[i] for i in (49, 94, 98)
    )
    print(f"submit→RUNNING   p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f}, p99 {p99 * 1000:.1f}")
    created = probe.job.created_at
    print(
        "first job after the start (running_stack's probe, created_at → started_at) "
        f"{(probe.started_at - created).total_seconds() * 1000:.0f} ms = → dispatched_at "
        f"{(probe.dispatched_at - created).total_seconds() * 1000:.0f} ms + → started_at "
        f"{(probe.started_at - probe.dispatched_at).total_seconds() * 1000:.0f} ms"
    )
    print(
        f"submit→RUNNING   median {statistics.median(to_running) * 1000:.1f} ms "
        f"(min {min(to_running) * 1000:.1f}, max {max(to_running) * 1000:.1f})"
    )
    print(f"submit→COMPLETED median {statistics.median(to_completed) * 1000:.1f} ms")
    print(f"all submit→RUNNING (ms): {ms(to_running)}")
    print(f"  of which submit→dispatched_at (ms): {ms(x for x, _ in split)}")
    print(f"  and dispatched_at→started_at (ms):  {ms(y for _, y in split)}")


if __name__ == "__main__":
    main()
