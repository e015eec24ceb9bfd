"""How a due backlog drains (ARCHITECTURE §4a): N one-step jobs all due at the same instant.

    make bench-backlog ARGS="--jobs 1200 --step-ms 200"
    (or: infra/with-stack.sh .venv/bin/python bench/backlog.py --jobs 1200 --step-ms 200)

Starts a real scheduler, beat and E executors of T threads on a throwaway database and topic
prefix (bench/common.py), submits N priority-0 jobs of one SLEEP step, all due at one `runAt`
a little ahead (so submission ends before it), and waits for them with a progress bar. When a
quarter has completed it submits one priority-9 job (one LOG step) and measures submit→started,
and cancels one priority-0 job still waiting, which must then never run. The dispatch lease
(--dispatch-timeout) is deliberately far shorter than the backlog takes to drain: flow control
must keep every delivery well inside it.

Prints the drain time (due instant → last finished_at, database times), the drain rate against
capacity (live slots x 1000 / step-ms), outcomes, lost attempts, redeliveries, the urgent job's
wait and the invariants. Exits 1 if a job was dead-lettered or lost or an invariant fails.
Times are wall-clock on a shared machine: quote them with the load they ran under.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime, timedelta

from common import Bar, configure, running_stack, submit_bulk, submit_steps

BACKLOG_PRIORITY = 0
URGENT_PRIORITY = 9
MIDWAY = 0.25
POLL_SECONDS = 0.5


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="backlog size (default 10000)")
    parser.add_argument(
        "--step-ms", type=int, default=100, help="one SLEEP step per job, in ms (default 100)"
    )
    parser.add_argument("--executors", type=int, default=1, help="executor processes (default 1)")
    parser.add_argument(
        "--threads",
        type=int,
        default=4,
        help="threads per executor = JOBWEAVER_EXECUTOR_CONCURRENCY (default 4)",
    )
    parser.add_argument(
        "--dispatch-timeout",
        type=float,
        default=20,
        help="JOBWEAVER_DISPATCH_TIMEOUT_SECONDS of the stack (default 20)",
    )
    parser.add_argument(
        "--max-retries", type=int, default=2, help="maxRetryCount of each job (default 2)"
    )
    parser.add_argument(
        "--submit",
        choices=("bulk", "loop"),
        default="bulk",
        help="job_submit_batch (bulk INSERTs, default) or job_submit once per job",
    )
    parser.add_argument(
        "--lead",
        type=float,
        default=None,
        help="seconds from the start of submission to the due instant (default: estimated)",
    )
    parser.add_argument(
        "--log-level", default="WARNING", help="JOBWEAVER_LOG_LEVEL of the stack (default WARNING)"
    )
    args = parser.parse_args(argv)
    if args.jobs < 4:
        parser.error("--jobs must be at least 4")
    if args.lead is None:
        per_job = 0.002 if args.submit == "bulk" else 0.03
        args.lead = 10 + args.jobs * per_job
    return args


def status_counts() -> dict[str, int]:
    from django.db.models import Count

    from jobweaver.scheduler.models import JobExecution

    rows = (
        JobExecution.objects.filter(priority=BACKLOG_PRIORITY)
        .values_list("status")
        .annotate(n=Count("id"))
    )
    return dict(rows)


def live_slots() -> list[int]:
    from jobweaver.scheduler.flow import live_executors

    return [r.slots for r in live_executors() if r.partitions]


def wait_for_executors(count: int, timeout: float = 90) -> list[int]:
    """All `count` executors registered with partitions (a rebalance may still be running)."""
    deadline = time.monotonic() + timeout
    while len(slots := live_slots()) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(slots)} of {count} executors registered")
        time.sleep(0.2)
    return slots


def dispatch_lease_seconds() -> float | None:
    """Shortest dispatch lease among DISPATCHED executions (lease_expires_at - dispatched_at):
    the stack's JOBWEAVER_DISPATCH_TIMEOUT_SECONDS, or longer when an executor renewed it."""
    from django.db.models import ExpressionWrapper, F, FloatField, Min
    from django.db.models.functions import Extract

    from jobweaver.scheduler.models import ExecutionStatus, JobExecution

    lease = ExpressionWrapper(
        Extract(F("lease_expires_at") - F("dispatched_at"), "epoch"), output_field=FloatField()
    )
    return JobExecution.objects.filter(status=ExecutionStatus.DISPATCHED).aggregate(m=Min(lease))[
        "m"
    ]


def per_job_overhead(step_ms: int) -> tuple[float, float, float, float] | None:
    """Backlog attempts: mean ms an attempt took beyond its step, and the mean, median and max
    ms from one attempt's finish to the next start on the same executor thread (the claim,
    outcome, ack and hand-over costs a slot pays per job)."""
    from django.db import connection

    from jobweaver.executor.models import ExecutionAttempt
    from jobweaver.jobs.models import Job

    attempts, jobs = ExecutionAttempt._meta.db_table, Job._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH a AS (
                SELECT a.started_at, a.finished_at,
                       a.started_at - lag(a.finished_at) OVER (
                           PARTITION BY a.worker_id ORDER BY a.started_at) AS gap
                FROM {attempts} a JOIN {jobs} j ON j.id = a.job_id
                WHERE j.priority = %s AND a.finished_at IS NOT NULL
            )
            SELECT avg(extract(epoch FROM finished_at - started_at)) * 1000 - %s,
                   avg(extract(epoch FROM gap)) * 1000,
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM gap)) * 1000,
                   max(extract(epoch FROM gap)) * 1000
            FROM a
            """,
            [BACKLOG_PRIORITY, step_ms],
        )
        row = cursor.fetchone()
    return None if row[1] is None else tuple(float(x) for x in row)


def cancel_one_waiting() -> tuple[object, str]:
    """Cancel a priority-0 job that is still PENDING; returns (job id, status right after)."""
    from jobweaver.core.errors import InvalidStateTransition
    from jobweaver.jobs.services import job_cancel
    from jobweaver.scheduler.models import ExecutionStatus, JobExecution

    for _ in range(5):
        job_id = (
            JobExecution.objects.filter(priority=BACKLOG_PRIORITY, status=ExecutionStatus.PENDING)
            .order_by("?")
            .values_list("job_id", flat=True)
            .first()
        )
        if job_id is None:
            break
        try:
            job_cancel(job_id=job_id)
        except InvalidStateTransition:
            continue  # it started between the read and the cancel: take another
        return job_id, JobExecution.objects.get(job_id=job_id).status
    raise RuntimeError("no waiting priority-0 job to cancel")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    configure(
        JOBWEAVER_EXECUTOR_CONCURRENCY=str(args.threads),
        JOBWEAVER_DISPATCH_TIMEOUT_SECONDS=str(args.dispatch_timeout),
        JOBWEAVER_LOG_LEVEL=args.log_level,
    )
    from django.conf import settings
    from django.db.models import Count, Max, Min, Sum

    from jobweaver.core.timeutil import iso
    from jobweaver.executor.models import ExecutionAttempt
    from jobweaver.outbox.services import outbox_relay_pending
    from jobweaver.scheduler.invariants import check_invariants
    from jobweaver.scheduler.models import ExecutionStatus, JobExecution

    step = [{"action": "SLEEP", "durationMs": args.step_ms}]
    n = args.jobs
    urgent: dict = {}
    cancelled: dict = {}
    peak = {"running": 0, "in_flight": 0}
    leases: list[float] = []
    with running_stack(executors=args.executors) as processes:
        slots = wait_for_executors(args.executors)
        capacity = sum(slots) * 1000 / args.step_ms
        print(
            f"stack: {len(slots)} executor(s), slots {slots} "
            f"(JOBWEAVER_EXECUTOR_CONCURRENCY={os.environ['JOBWEAVER_EXECUTOR_CONCURRENCY']}), "
            f"prefetch {settings.JOBWEAVER_DISPATCH_PREFETCH}, "
            f"dispatch timeout {settings.JOBWEAVER_DISPATCH_TIMEOUT_SECONDS:g} s, "
            f"beat dispatch tick {settings.JOBWEAVER_DISPATCH_INTERVAL_SECONDS:g} s",
            flush=True,
        )

        # --- submit the backlog, all due at one instant ---------------------------------------
        t0 = time.monotonic()
        due = (datetime.now(UTC) + timedelta(seconds=args.lead)).replace(microsecond=0)
        if args.submit == "bulk":
            ids = submit_bulk(
                step, n, run_at=due, priority=BACKLOG_PRIORITY, max_retries=args.max_retries
            )
            how = f"job_submit_batch, {settings.JOBWEAVER_MAX_BATCH_JOBS} per transaction"
        else:
            fields = {
                "priority": BACKLOG_PRIORITY,
                "maxRetryCount": args.max_retries,
                "runAt": iso(due),
            }
            ids = [submit_steps(step, **fields) for _ in range(n)]
            how = "job_submit once per job"
        inserted = time.monotonic() - t0
        outbox_relay_pending()  # the job-created events, so their relay does not overlap the drain
        relayed = time.monotonic() - t0 - inserted
        ahead = (due - datetime.now(UTC)).total_seconds()
        print(
            f"submitted {n} jobs in {inserted:.1f} s ({n / inserted:.0f} jobs/s; {how}); "
            f"job-created events relayed {relayed:.1f} s later; due at {iso(due)}, "
            + (f"{ahead:.1f} s after that" if ahead >= 0 else f"OVERRAN it by {-ahead:.1f} s"),
            flush=True,
        )

        # --- wait for the due instant, then for the drain -------------------------------------
        if ahead > 0:
            time.sleep(ahead)
        expected = n * args.step_ms / 1000 / sum(slots)
        deadline = time.monotonic() + 3 * expected + 120
        last_lease_sample = 0.0
        with Bar() as bar:
            drain = bar.add("drain", n)
            while True:
                counts = status_counts()
                done = sum(v for k, v in counts.items() if k not in _LIVE_OR_WAITING)
                running = counts.get("RUNNING", 0)
                in_flight = running + counts.get("DISPATCHED", 0)
                peak["running"] = max(peak["running"], running)
                peak["in_flight"] = max(peak["in_flight"], in_flight)
                bar.update(
                    drain,
                    done,
                    f"running {running} in flight {in_flight} pending {counts.get('PENDING', 0)}",
                )
                if time.monotonic() - last_lease_sample >= 5:
                    last_lease_sample = time.monotonic()
                    if (lease := dispatch_lease_seconds()) is not None:
                        leases.append(lease)
                if not urgent and counts.get("COMPLETED", 0) >= MIDWAY * n:
                    urgent["submitted"] = datetime.now(UTC)
                    urgent["job_id"] = submit_steps(
                        [{"action": "LOG", "message": "urgent"}], priority=URGENT_PRIORITY
                    )
                    job_id, status = cancel_one_waiting()
                    cancelled.update(job_id=job_id, status_after_cancel=status)
                    bar.note(
                        f"{done}/{n} done: submitted urgent job {urgent['job_id']}, "
                        f"cancelled waiting job {job_id} ({status})"
                    )
                if urgent and "started" not in urgent:
                    started = JobExecution.objects.get(job_id=urgent["job_id"]).started_at
                    if started is not None:
                        urgent["started"] = started
                        behind = ExecutionAttempt.objects.filter(
                            job__priority=BACKLOG_PRIORITY,
                            started_at__gt=urgent["submitted"],
                            started_at__lt=started,
                        ).count()
                        urgent["backlog_started_before"] = behind
                if done >= n and "started" in urgent:
                    break
                if time.monotonic() > deadline:
                    bar.note(f"TIMED OUT with {counts}")
                    break
                time.sleep(POLL_SECONDS)
        log_paths = [str(p.log_path) for p in processes]

    # --- figures (database times) ---------------------------------------------------------------
    backlog = JobExecution.objects.filter(job_id__in=ids)
    statuses = dict(backlog.values_list("status").annotate(n=Count("id")))
    totals = backlog.filter(
        status__in=[ExecutionStatus.COMPLETED, ExecutionStatus.FAILED]
    ).aggregate(last=Max("finished_at"), redelivered=Sum("redelivery_count"))
    redeliveries = JobExecution.objects.filter(job_id__in=[*ids, urgent.get("job_id")]).aggregate(
        r=Sum("redelivery_count")
    )["r"]
    attempts = ExecutionAttempt.objects.filter(job_id__in=ids)
    outcomes = dict(attempts.values_list("outcome").annotate(n=Count("event_id")))
    first_start = attempts.aggregate(m=Min("started_at"))["m"]
    completed = statuses.get("COMPLETED", 0)
    failed = statuses.get("FAILED", 0)
    lost = outcomes.get("LOST", 0)
    finished = completed + failed

    print()
    print(
        f"backlog: {n} jobs x 1 SLEEP {args.step_ms} ms, priority {BACKLOG_PRIORITY}, "
        f"maxRetryCount {args.max_retries}; {args.executors} executor(s) x {args.threads} threads"
    )
    ok = True
    if totals["last"] is None or first_start is None:
        print("nothing finished")
        ok = False
    else:
        drain = (totals["last"] - due).total_seconds()
        busy = (totals["last"] - first_start).total_seconds()
        rate = finished / drain
        print(
            f"drain time        {drain:.1f} s (due instant → last finished_at); "
            f"ideal {expected:.1f} s"
        )
        print(f"due → first start {(first_start - due).total_seconds():.1f} s")
        print(
            f"drain rate        {rate:.1f} jobs/s = {100 * rate / capacity:.0f}% of capacity "
            f"{capacity:.0f} jobs/s ({sum(slots)} slots x 1000/{args.step_ms} ms)"
        )
        print(
            f"busy rate         {finished / busy:.1f} jobs/s = "
            f"{100 * finished / busy / capacity:.0f}% (first start → last finish, {busy:.1f} s)"
        )
    print(
        f"jobs              COMPLETED {completed}, FAILED (dead-lettered) {failed}, "
        f"CANCELLED {statuses.get('CANCELLED', 0)}, "
        f"other {n - completed - failed - statuses.get('CANCELLED', 0)}"
    )
    print(
        f"attempts          {sum(outcomes.values())}: "
        + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
        + f"; LOST {lost}"
    )
    print(f"redeliveries      {redeliveries or 0} (sum of JobExecution.redelivery_count)")
    print(
        f"peak observed     RUNNING {peak['running']}, DISPATCHED+RUNNING {peak['in_flight']} "
        f"(credits {sum(slots) * settings.JOBWEAVER_DISPATCH_PREFETCH})"
    )
    overhead = per_job_overhead(args.step_ms)
    if overhead is not None:
        print(
            f"per-job overhead  {overhead[0]:.1f} ms inside the attempt (started_at → finished_at "
            f"minus the step), {overhead[1]:.1f} ms between attempts on one thread (median "
            f"{overhead[2]:.1f}, max {overhead[3]:.0f})"
        )
    if leases:
        print(f"dispatch lease    min {min(leases):.1f} s over {len(leases)} samples of DISPATCHED")
    if "started" in urgent:
        wait = (urgent["started"] - urgent["submitted"]).total_seconds()
        print(
            f"urgent job        priority {URGENT_PRIORITY}, submit → started_at "
            f"{wait * 1000:.0f} ms ({urgent['backlog_started_before']} backlog jobs started "
            "in between)"
        )
        execution = JobExecution.objects.get(job_id=urgent["job_id"])
        to_dispatch = (execution.dispatched_at - urgent["submitted"]).total_seconds()
        to_start = (execution.started_at - execution.dispatched_at).total_seconds()
        print(
            f"                  = submit → dispatched_at {to_dispatch * 1000:.0f} ms + "
            f"→ started_at {to_start * 1000:.0f} ms; {execution.redelivery_count} redeliveries"
        )
    else:
        print("urgent job        NEVER STARTED" if urgent else "urgent job        not submitted")
        ok = False
    if cancelled:
        victim = JobExecution.objects.get(job_id=cancelled["job_id"])
        ran = ExecutionAttempt.objects.filter(job_id=cancelled["job_id"]).count()
        never_ran = victim.status == ExecutionStatus.CANCELLED and ran == 0
        print(
            f"cancelled job     {victim.status}, {ran} attempts, started_at {victim.started_at} "
            f"→ {'never ran' if never_ran else 'RAN'}"
        )
        ok = ok and never_ran
    violations = check_invariants(job_ids=[*ids, urgent.get("job_id") or ids[0]])
    print(f"invariants        {'hold' if not violations else f'{len(violations)} VIOLATIONS'}")
    for violation in violations[:20]:
        print(f"  {violation}")
    print("worker logs       " + " ".join(log_paths))
    ok = ok and not violations and failed == 0 and lost == 0 and finished == n - 1
    return 0 if ok else 1


_LIVE_OR_WAITING = {"PENDING", "DISPATCHED", "RUNNING"}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
