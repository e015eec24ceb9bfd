"""Workflows at full size (ARCHITECTURE §16), the scenarios the test suite runs small
(tests/integration/test_workflows.py):

    make bench-workflows
    (or: infra/with-stack.sh .venv/bin/python bench/workflows.py [--workflows 1000] [--width 4])

Starts a real scheduler, beat and --executors executors of 4 threads on a throwaway database and
topic prefix (bench/common.py), then:

1. accept: how long `workflow_submit` takes for one workflow of JOBWEAVER_MAX_WORKFLOW_JOBS
   jobs (a fan-out of 999 into one join), median of three;
2. fan-in: --workflows two-level workflows (--width parallel jobs of one LOG step joined by one
   more), submitted back to back, against the same number of jobs without edges submitted in
   batches of the same size; jobs/s for each from the first submit to the last finish, and the
   ratio. The invariants are checked after each (workflow_order and workflow_counts included).

Prints one line per figure; exits 1 if an invariant fails.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from common import configure, running_stack

LOG = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "bench"}]}}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workflows", type=int, default=1000, help="two-level workflows")
    parser.add_argument("--width", type=int, default=4, help="parallel jobs before each join")
    parser.add_argument("--executors", type=int, default=2)
    return parser.parse_args(argv)


def fan_in_spec(width: int, name: str = "fan-in"):
    from jobweaver.workflows.validation import parse_workflow_request

    parents = [{"ref": f"p{n}", "job": LOG} for n in range(width)]
    join = {"ref": "join", "dependsOn": [p["ref"] for p in parents], "job": LOG}
    return parse_workflow_request({"name": name, "jobs": [*parents, join]})


def wait_finished(job_ids, timeout: float = 900) -> float:
    """Seconds until every job has finished, polled; the time of the last finish."""
    from django.db.models import Max

    from jobweaver.scheduler.models import JobExecution

    deadline = time.monotonic() + timeout
    while JobExecution.objects.filter(job_id__in=job_ids, finished_at__isnull=True).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(job_ids)} jobs not finished in {timeout} s")
        time.sleep(0.25)
    return JobExecution.objects.filter(job_id__in=job_ids).aggregate(last=Max("finished_at"))[
        "last"
    ]


def _last_finish(nodes):
    from django.db.models import Max

    from jobweaver.scheduler.models import JobExecution

    return JobExecution.objects.filter(job_id__in=nodes.values("job_id")).aggregate(
        last=Max("finished_at")
    )["last"]


def invariants(job_ids) -> int:
    from jobweaver.scheduler.invariants import check_invariants

    violations = check_invariants(job_ids=job_ids)
    for violation in violations[:10]:
        print(f"  VIOLATION {violation}")
    return len(violations)


def accept(args) -> bool:
    from jobweaver.conf import settings
    from jobweaver.workflows.services import workflow_submit

    biggest = settings.JOBWEAVER_MAX_WORKFLOW_JOBS
    spec = fan_in_spec(biggest - 1, name="biggest")
    times = []
    for _ in range(3):
        started = time.perf_counter()
        workflow_submit(spec=spec)
        times.append(time.perf_counter() - started)
    print(
        f"accept: a workflow of {biggest} jobs stored in {statistics.median(times) * 1000:.0f} ms "
        f"(median of 3: {', '.join(f'{t * 1000:.0f}' for t in times)} ms)"
    )
    return True


def fan_in(args) -> bool:
    from django.utils import timezone

    from jobweaver.jobs.services import job_submit_batch
    from jobweaver.jobs.validation import parse_job_request
    from jobweaver.workflows.models import Node
    from jobweaver.workflows.services import workflow_submit

    per = args.width + 1
    spec = fan_in_spec(args.width)
    began, clock = timezone.now(), time.perf_counter()
    workflow_ids = [workflow_submit(spec=spec).id for _ in range(args.workflows)]
    submit_edges = time.perf_counter() - clock
    jobs = list(Node.objects.filter(workflow_id__in=workflow_ids).values_list("job_id", flat=True))
    last = wait_finished(jobs)
    with_edges = len(jobs) / (last - began).total_seconds()
    joins = Node.objects.filter(workflow_id__in=workflow_ids, ref="join")
    parents_last = _last_finish(
        Node.objects.filter(workflow_id__in=workflow_ids).exclude(ref="join")
    )
    print(
        f"  parents done {(parents_last - began).total_seconds():.1f} s, joins done "
        f"{(_last_finish(joins) - began).total_seconds():.1f} s after the first submit"
    )

    plain = parse_job_request(LOG)
    began, clock = timezone.now(), time.perf_counter()
    ids = [job.id for _ in range(args.workflows) for job in job_submit_batch(specs=[plain] * per)]
    submit_plain = time.perf_counter() - clock
    last = wait_finished(ids)
    without = len(ids) / (last - began).total_seconds()

    bad = invariants(jobs) + invariants(ids)
    print(
        f"fan-in: {args.workflows} workflows of {args.width} jobs + a join ({len(jobs)} jobs): "
        f"{with_edges:.0f} jobs/s (submitted in {submit_edges:.1f} s); the same jobs without "
        f"edges in batches of {per}: {without:.0f} jobs/s (submitted in {submit_plain:.1f} s); "
        f"ratio {with_edges / without:.2f}; violations {bad}"
    )
    return bad == 0


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    configure(JOBWEAVER_EXECUTOR_CONCURRENCY="4", JOBWEAVER_SUBMIT_THROTTLE_RATE="1000000")
    ok = True
    with running_stack(executors=args.executors):
        for scenario in (accept, fan_in):
            ok = scenario(args) and ok
    print("all held" if ok else "SOMETHING FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
