"""Queues at full size (ARCHITECTURE §15), the scenarios the test suite runs small
(tests/integration/test_queues.py, test_queue_sharing.py):

    make bench-queues
    (or: infra/with-stack.sh .venv/bin/python bench/queues.py [--flood 1000] [--wait 60])

Starts a real scheduler, beat and three executors of 4 threads serving the queues below on a
throwaway database and topic prefix (bench/common.py), then, checking the invariants after each:

1. unserved: jobs of a queue no executor serves stay PENDING and unattempted for --wait
   seconds; an executor started for it drains them; once it stops, new work waits again and
   nothing has FAILED;
2. cap: maxRunning 2 on a queue the three executors serve: the most attempts at once;
3. flood: --flood jobs of 100 ms in one queue, then 20 in another (equal weights): how much of
   the flood had completed when the 20 were done, and their waits;
4. weights: 3:1 with both queues waiting: the share of dispatches while both wait;
5. rebalance: a fourth executor joins the pool mid-flood: jobs that ran on an executor not
   serving their queue (must be 0), and deliveries handed back.

Prints one line per figure. Exits 1 if an invariant or a must-hold figure fails.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from common import configure, running_stack

POOL_QUEUES = "default,capped,flood,late,mid"
NIGHTLY = "nightly"  # served by nobody until the unserved scenario starts an executor for it
STEP_MS = 100


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flood", type=int, default=1000, help="flood size (default 1000)")
    parser.add_argument(
        "--wait", type=float, default=60, help="seconds unserved work is watched (default 60)"
    )
    return parser.parse_args(argv)


def submit(queue: str, count: int, step_ms: int = STEP_MS) -> list:
    from jobweaver.jobs.services import job_submit_batch
    from jobweaver.jobs.validation import parse_job_request

    spec = parse_job_request(
        {
            "jobType": "SIMULATION",
            "payload": {"steps": [{"action": "SLEEP", "durationMs": step_ms}]},
            "queueName": queue,
        }
    )
    ids: list = []
    while len(ids) < count:
        ids += [job.id for job in job_submit_batch(specs=[spec] * min(500, count - len(ids)))]
    return ids


def completed(job_ids) -> int:
    from jobweaver.scheduler.models import JobExecution

    return JobExecution.objects.filter(job_id__in=job_ids, status="COMPLETED").count()


def wait_completed(job_ids, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while completed(job_ids) < len(job_ids):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(job_ids)} jobs did not complete in {timeout} s")
        time.sleep(0.1)


def invariants(job_ids) -> int:
    from jobweaver.scheduler.invariants import check_invariants

    violations = check_invariants(job_ids=list(job_ids))
    for violation in violations:
        print(f"  VIOLATION {violation}")
    return len(violations)


_started: list = []


def start_executor(name: str, queues: str, threads: int = 4):
    from tests.stack import WorkerProcess, child_environment

    env = {
        **child_environment(),
        "JOBWEAVER_EXECUTOR_QUEUES": queues,
        "JOBWEAVER_EXECUTOR_CONCURRENCY": str(threads),
    }
    from jobweaver.scheduler.flow import live_executors

    worker = WorkerProcess("executor", name, env).start()
    _started.append(worker)  # stopped by main() whatever happens
    worker.wait_ready()
    # Registered with run-job partitions (the stack logs at WARNING, so its log does not say).
    deadline = time.monotonic() + 60
    while not any(
        executor.worker_id.endswith(f":{worker.pid}") and executor.partitions
        for executor in live_executors()
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} got no run-job partition")
        time.sleep(0.2)
    return worker


def unserved(args) -> bool:
    from jobweaver.executor.models import ExecutionAttempt
    from jobweaver.scheduler.models import JobExecution

    def watch(job_ids, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            statuses = set(
                JobExecution.objects.filter(job_id__in=job_ids).values_list("status", flat=True)
            )
            if statuses != {"PENDING"}:
                print(f"  unserved work left PENDING: {statuses}")
                return False
            time.sleep(0.5)
        return not ExecutionAttempt.objects.filter(job_id__in=job_ids).exists()

    waiting = submit(NIGHTLY, 50)
    stayed = watch(waiting, args.wait)
    print(f"unserved: 50 jobs stayed PENDING, unattempted, for {args.wait:.0f} s: {stayed}")
    started = time.monotonic()
    nightly = start_executor("bench-nightly", NIGHTLY)
    wait_completed(waiting)
    print(
        f"unserved: an executor for the queue started and drained it in "
        f"{time.monotonic() - started:.1f} s (start included)"
    )
    nightly.stop()
    later = submit(NIGHTLY, 10)
    again = watch(later, min(args.wait, 15))
    failed = JobExecution.objects.filter(queue_name=NIGHTLY, status="FAILED").count()
    print(f"unserved: after it stopped, new work waits again: {again}; FAILED: {failed}")
    JobExecution.objects.filter(job_id__in=later).delete()  # nobody will run them
    return stayed and again and failed == 0 and invariants(waiting) == 0


def most_at_once(job_ids) -> int:
    from jobweaver.executor.models import ExecutionAttempt

    edges = []
    for started, finished in ExecutionAttempt.objects.filter(job_id__in=job_ids).values_list(
        "started_at", "finished_at"
    ):
        edges += [(started, 1), (finished, -1)]
    running = peak = 0
    for _, step in sorted(edges):
        running += step
        peak = max(peak, running)
    return peak


def cap(args) -> bool:
    from jobweaver.scheduler.models import Queue

    Queue.objects.create(name="capped", max_running=2)
    jobs = submit("capped", 60)
    wait_completed(jobs)
    peak = most_at_once(jobs)
    print(f"cap: maxRunning 2 over 3 executors of 4 threads: at most {peak} at once (60 jobs)")
    return peak == 2 and invariants(jobs) == 0


def flood(args) -> bool:
    from jobweaver.executor.models import ExecutionAttempt

    flooded = submit("flood", args.flood)
    late = submit("late", 20)
    wait_completed(late)
    done = completed(flooded)
    waits = [
        (attempt.started_at - created).total_seconds()
        for attempt, created in (
            (a, a.job.created_at)
            for a in ExecutionAttempt.objects.filter(job_id__in=late).select_related("job")
        )
    ]
    wait_completed(flooded)
    print(
        f"flood: {done} of {args.flood} flood jobs ({done / args.flood:.0%}) had completed when "
        f"the 20 late jobs were done; their wait median {statistics.median(waits):.2f} s, "
        f"max {max(waits):.2f} s"
    )
    return done < args.flood / 4 and invariants(flooded + late) == 0


def weights(args) -> bool:
    from jobweaver.scheduler.models import JobExecution, Queue

    Queue.objects.update_or_create(name="flood", defaults={"weight": 3})
    Queue.objects.update_or_create(name="late", defaults={"weight": 1})
    heavy, light = submit("flood", args.flood * 2), submit("late", args.flood // 2)
    wait_completed(heavy + light)

    def times(jobs) -> list:
        rows = JobExecution.objects.filter(job_id__in=jobs)
        return sorted(rows.values_list("dispatched_at", flat=True))

    heavy_times, light_times = times(heavy), times(light)
    first, last = light_times[0], light_times[-1]
    heavy_share = sum(1 for at in heavy_times if first <= at <= last)
    ratio = heavy_share / len(light_times)
    outlasted = heavy_times[-1] > last
    print(
        f"weights: 3:1, dispatches while both waited: {heavy_share} : {len(light_times)} = "
        f"{ratio:.2f} (heavy queue still waiting at the end: {outlasted})"
    )
    Queue.objects.filter(name__in=["flood", "late"]).delete()
    return outlasted and abs(ratio - 3) <= 0.3 and invariants(heavy + light) == 0


def rebalance(args, pool) -> bool:
    from jobweaver.executor.models import ExecutionAttempt
    from jobweaver.scheduler.models import JobExecution

    mid = submit("mid", args.flood, step_ms=50)
    started = time.monotonic()
    while completed(mid) < args.flood // 10:
        if time.monotonic() - started > 120:
            raise TimeoutError("the flood did not get under way")
        time.sleep(0.1)
    joined = start_executor("bench-joined", POOL_QUEUES)
    try:
        mid += submit("mid", args.flood // 2, step_ms=50)
        wait_completed(mid)
        serving = {worker.pid for worker in [*pool, joined]}
        ran = ExecutionAttempt.objects.filter(job_id__in=mid).values_list("worker_id", flat=True)
        wrong = sum(1 for worker in ran if int(worker.split(":")[1]) not in serving)
        by_joined = sum(1 for worker in ran if int(worker.split(":")[1]) == joined.pid)
        handed_back = sum(
            JobExecution.objects.filter(job_id__in=mid).values_list("redelivery_count", flat=True)
        )
        print(
            f"rebalance: an executor joined mid-flood and ran {by_joined} of {len(mid)}; jobs "
            f"run by an executor not serving their queue: {wrong}; redeliveries: {handed_back}"
        )
        return wrong == 0 and by_joined > 0 and invariants(mid) == 0
    finally:
        joined.stop()


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    configure(
        JOBWEAVER_EXECUTOR_QUEUES=POOL_QUEUES,
        JOBWEAVER_EXECUTOR_CONCURRENCY="4",
        JOBWEAVER_DISPATCH_INTERVAL_SECONDS="0.25",
    )
    ok = True
    with running_stack(executors=3) as processes:
        pool = [p for p in processes if p.role == "executor"]
        try:
            for scenario in (unserved, cap, flood, weights):
                ok = scenario(args) and ok
            ok = rebalance(args, pool) and ok
        finally:
            # An executor left running would register itself in the next run's database.
            for worker in _started:
                worker.stop()
    print("all held" if ok else "SOMETHING FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
