"""Submit→RUNNING latency of single jobs on an idle stack, the first job after a start included.

    make bench-latency       (or: infra/with-stack.sh .venv/bin/python bench/submit_latency.py)
    make bench-latency ARGS="--jobs 50 --in-process"
    make bench-latency ARGS="--pause 70 --after-pause 5"

Starts gunicorn (as `make run` does), then the scheduler, beat and one executor, and as soon as
they are ready submits N one-step jobs through `POST /api/jobs`, one at a time, each after the
previous completed: the first one is the first job after the start. Ready means what flow
control means by it: the executor registered its partitions (it does so once its consumer
fetches them; until then no job is sent to it, so a job submitted earlier waits for the start,
not for the path). The time from Celery's "ready" line to that registration is printed too.
Prints submit→RUNNING (the time before the request, on this machine's clock, to the
execution's started_at on the database's clock, same machine) and submit→COMPLETED, and each
job's legs: to the job's created_at (the web's clock as it writes the job: the request up to
its INSERT), to the execution's dispatched_at (the submit's transaction and the claim), to its
started_at (Kafka, the executor).
`--in-process` submits through the submission service in this process instead (its Kafka
producer is cold for the first job). `--pause S` then leaves the stack idle for S seconds and
submits `--after-pause` more jobs the same way: the first jobs of a quiet stack (its database
connections are reopened once older than CONN_MAX_AGE, JOBWEAVER_DB_CONN_MAX_AGE_SECONDS).
Quote medians: the machine is noisy.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from datetime import UTC, datetime

from common import api_token, configure, running_stack, running_web, submit_steps, wait_for_job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument(
        "--pause", type=float, default=0, help="then leave the stack idle this many seconds"
    )
    parser.add_argument("--after-pause", type=int, default=5, help="jobs after the pause")
    args = parser.parse_args()
    # As deployed, like bench/throughput.py and bench/soak.py: DEBUG off (with it on, Django
    # records every statement of every process, and renders each one's parameters into text).
    configure(DJANGO_DEBUG="0", DJANGO_SECRET_KEY="bench-only-" + uuid.uuid4().hex)
    import requests

    from jobweaver.scheduler.models import JobExecution

    body = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
    token = api_token()
    to_running, to_completed, split = [], [], []
    web = running_web(workers=1, threads=4, JOBWEAVER_SECURE_SSL_REDIRECT="0")
    with web as (base, _), running_stack(executors=1, probe=False):
        started = time.monotonic()
        wait_for_registered_executor()
        registration = time.monotonic() - started
        session = requests.Session()
        session.headers["Authorization"] = f"Token {token}"

        def submit_one() -> None:
            submitted = datetime.now(UTC)
            t0 = time.monotonic()
            if args.in_process:
                job_id = submit_steps(body["payload"]["steps"])
            else:
                response = session.post(f"{base}/api/jobs", json=body, timeout=30)
                response.raise_for_status()
                job_id = response.json()["jobId"]
            wait_for_job(job_id, timeout=30)
            to_completed.append(time.monotonic() - t0)
            execution = JobExecution.objects.select_related("job").get(job_id=job_id)
            started = execution.started_at
            to_running.append((started - submitted).total_seconds())
            split.append(
                (
                    (execution.job.created_at - submitted).total_seconds(),
                    (execution.dispatched_at - execution.job.created_at).total_seconds(),
                    (started - execution.dispatched_at).total_seconds(),
                )
            )

        for _ in range(args.jobs):
            submit_one()
        after_pause = []
        if args.pause:
            time.sleep(args.pause)  # the scenario: a stack left idle this long
            for _ in range(args.after_pause):
                submit_one()
            after_pause = to_running[args.jobs :]
            del to_running[args.jobs :], to_completed[args.jobs :]
            after_split, split[args.jobs :] = split[args.jobs :], []
    ms = lambda xs: ", ".join(f"{x * 1000:.0f}" for x in xs)  # noqa: E731
    path = "the service in-process" if args.in_process else "POST /api/jobs"
    print(f"jobs: {args.jobs}, through {path}")
    print(f"executor registered {registration * 1000:.0f} ms after its Celery 'ready' line")
    p50, p95, p99 = (
        statistics.quantiles(to_running, n=100, method="inclusive")[i] for i in (49, 94, 98)
    )
    print(f"submit→RUNNING   p50 {p50 * 1000:.1f} ms, p95 {p95 * 1000:.1f}, p99 {p99 * 1000:.1f}")
    print(
        f"first job after the start: submit→RUNNING {to_running[0] * 1000:.0f} ms "
        f"(→ created {split[0][0] * 1000:.0f} ms, → dispatched {split[0][1] * 1000:.0f} ms, "
        f"→ started {split[0][2] * 1000:.0f} ms)"
    )
    print(
        f"submit→RUNNING   median {statistics.median(to_running) * 1000:.1f} ms "
        f"(min {min(to_running) * 1000:.1f}, max {max(to_running) * 1000:.1f})"
    )
    print(f"submit→COMPLETED median {statistics.median(to_completed) * 1000:.1f} ms")
    print(f"all submit→RUNNING (ms): {ms(to_running)}")
    print(f"  of which submit→created_at (ms):    {ms(leg[0] for leg in split)}")
    print(f"  then created_at→dispatched_at (ms): {ms(leg[1] for leg in split)}")
    print(f"  and dispatched_at→started_at (ms):  {ms(leg[2] for leg in split)}")
    if after_pause:
        print(f"after {args.pause:.0f} s idle, submit→RUNNING (ms): {ms(after_pause)}")
        print(f"  of which submit→created_at (ms):    {ms(leg[0] for leg in after_split)}")
        print(f"  then created_at→dispatched_at (ms): {ms(leg[1] for leg in after_split)}")
        print(f"  and dispatched_at→started_at (ms):  {ms(leg[2] for leg in after_split)}")


def wait_for_registered_executor(timeout: float = 30) -> None:
    from django.db import transaction

    from jobweaver.engine.claim import credits as claim_credits

    deadline = time.monotonic() + timeout
    while True:
        with transaction.atomic():
            if any(credit.free > 0 for credit in claim_credits.credits()):
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"no executor registered its partitions in {timeout} s")
        time.sleep(0.01)


if __name__ == "__main__":
    main()
