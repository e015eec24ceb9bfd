"""Pauses and per-key limits with real executors (apps/engine/claim/rules.py): the dispatcher
enforces them under its global lock, so they hold across every executor process.

Times come from the database clock (attempts' started_at/finished_at, executions'
dispatched_at). Each test removes the limits and pauses it set, and asserts the invariants.
The same rules without workers: apps/scheduler/tests/test_pauses_and_limits.py.
"""

from __future__ import annotations

import collections
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max

from jobweaver.engine.claim.rules import RATE_WINDOW_SECONDS
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.services import job_submit_batch
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler import flow
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.models import JobExecution, Pause
from jobweaver.scheduler.services import (
    concurrency_limit_delete,
    concurrency_limit_set,
    execution_run_now,
    queue_pause,
    queue_resume,
)
from tests.integration.helpers import assert_invariants, live_executors, worker_pid
from tests.stack import stop_together, wait_for

pytestmark = [pytest.mark.integration]

STEP_MS = 300
SLEEP_TASK = "jobweaver_site.examples.tasks.sleep"


class Rules:
    """The limits and pauses a test sets, removed again when it ends (pass or fail)."""

    def __init__(self):
        self.patterns: list[str] = []
        self.pauses: list[tuple[str, str]] = []

    def limit(self, pattern: str, *, max_running=None, max_per_second=None) -> None:
        self.patterns.append(pattern)
        concurrency_limit_set(
            pattern=pattern, max_running=max_running, max_per_second=max_per_second
        )

    def pause(self, scope: str, name: str):
        self.pauses.append((scope, name))
        return queue_pause(scope=scope, name=name, reason="integration test", paused_by="tests")

    def remove_all(self) -> None:
        for pattern in self.patterns:
            concurrency_limit_delete(pattern=pattern)
        for scope, name in self.pauses:
            queue_resume(scope=scope, name=name)


@pytest.fixture
def rules(live_db):
    set_by_test = Rules()
    try:
        yield set_by_test
    finally:
        set_by_test.remove_all()


# --- helpers --------------------------------------------------------------------------------


def db_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def sleep_job(**fields) -> dict:
    return {
        "jobType": "SIMULATION",
        "payload": {"steps": [{"action": "SLEEP", "durationMs": STEP_MS}]},
        **fields,
    }


def submit(bodies: list[dict]) -> list:
    """One batch (one transaction, one dispatch): the whole backlog is due at once."""
    return [job.id for job in job_submit_batch(specs=[parse_job_request(b) for b in bodies])]


def statuses(job_ids) -> collections.Counter:
    return collections.Counter(
        JobExecution.objects.filter(job_id__in=job_ids).values_list("status", flat=True)
    )


def wait_all_completed(job_ids, *, timeout: float) -> None:
    try:
        wait_for(
            lambda: statuses(job_ids)["COMPLETED"] == len(job_ids),
            timeout=timeout,
            interval=0.1,
            message=f"all {len(job_ids)} jobs to complete",
        )
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out} (now {dict(statuses(job_ids))})") from None


def assert_each_ran_exactly_once(job_ids) -> None:
    """Every job COMPLETED with one attempt, a SUCCESS: nothing lost, nothing run twice."""
    assert statuses(job_ids) == {"COMPLETED": len(job_ids)}
    outcomes = collections.Counter(
        ExecutionAttempt.objects.filter(job_id__in=job_ids).values_list("outcome", flat=True)
    )
    assert outcomes == {"SUCCESS": len(job_ids)}, dict(outcomes)
    per_job = collections.Counter(
        ExecutionAttempt.objects.filter(job_id__in=job_ids).values_list("job_id", flat=True)
    )
    assert set(per_job.values()) == {1} and len(per_job) == len(job_ids)
    assert_invariants(job_ids)


def max_overlap(intervals: list[tuple[datetime, datetime]]) -> int:
    """The most intervals open at one instant. At an equal timestamp an end counts before a
    start: a job's end is stamped inside the transaction whose commit frees its place, and the
    next job is dispatched, then started, only after that commit — equal readings of the
    database clock can only be a tie at its resolution, never an overlap."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    open_now = highest = 0
    for _, change in events:
        open_now += change
        highest = max(highest, open_now)
    return highest


def max_in_window(times: list[datetime], seconds: float) -> int:
    """The most `times` inside any half-open window [t, t + seconds)."""
    ordered = sorted(times)
    window = timedelta(seconds=seconds)
    return max(
        sum(1 for other in ordered[i:] if other - first < window) for i, first in enumerate(ordered)
    )


def settled_executors(stack) -> list:
    """Wait until every live executor of the stack is registered for flow control and the
    run-job partitions are split among them, each once (no rebalance under way); returns
    their registrations."""
    every_partition = set(range(settings.JOBWEAVER_RUN_JOB_PARTITIONS))

    def settled():
        pids = {str(worker.pid) for worker in stack.executors if worker.alive()}
        ours = [e for e in flow.live_executors() if e.worker_id.rpartition(":")[2] in pids]
        owned = [partition for e in ours for partition in e.partitions]
        if len(ours) == len(pids) and len(owned) == len(set(owned)) == len(every_partition):
            return ours
        return None

    return wait_for(
        settled, timeout=60, interval=0.1, message="executors to register and split partitions"
    )


# --- per-key concurrency limit --------------------------------------------------------------


def test_a_limit_of_two_running_per_key_holds_across_three_executors(stack, rules, unique):
    started = live_executors(stack, 3)
    try:
        assert len(settled_executors(stack)) >= 3
        tag = f"t{unique}"
        rules.limit(f"{tag}-customer-*", max_running=2)
        limited_key = f"{tag}-customer-1"
        # Other work: no key, a key no pattern matches, and keys of the same pattern with one
        # job each (the limit is per key, not per pattern).
        others = (
            [sleep_job() for _ in range(10)]
            + [sleep_job(concurrencyKey=f"{tag}-other") for _ in range(10)]
            + [sleep_job(concurrencyKey=f"{tag}-customer-{n}") for n in range(2, 12)]
        )
        interleaved = [
            body for other in others for body in (sleep_job(concurrencyKey=limited_key), other)
        ]
        submitted_at = db_now()
        job_ids = submit(interleaved)
        limited, other_ids = job_ids[0::2], job_ids[1::2]

        wait_all_completed(job_ids, timeout=60)
        assert_each_ran_exactly_once(job_ids)

        limited_attempts = list(ExecutionAttempt.objects.filter(job_id__in=limited))
        other_attempts = list(ExecutionAttempt.objects.filter(job_id__in=other_ids))
        running_at_once = max_overlap([(a.started_at, a.finished_at) for a in limited_attempts])
        # The documented limit counts DISPATCHED too: sent-to-finished, per execution.
        in_flight_at_once = max_overlap(
            list(
                JobExecution.objects.filter(job_id__in=limited).values_list(
                    "dispatched_at", "finished_at"
                )
            )
        )
        others_done = max(a.finished_at for a in other_attempts)
        limited_done = max(a.finished_at for a in limited_attempts)
        started_after_others_done = sum(1 for a in limited_attempts if a.started_at > others_done)
        limited_executors = collections.Counter(worker_pid(a) for a in limited_attempts)
        others_at_once = max_overlap([(a.started_at, a.finished_at) for a in other_attempts])
        print(
            f"\n{limited_key}: at most {running_at_once} running, {in_flight_at_once} in flight; "
            f"on executors {dict(limited_executors)}; done "
            f"{(limited_done - submitted_at).total_seconds():.2f} s after submit. Others: at "
            f"most {others_at_once} running, all done after "
            f"{(others_done - submitted_at).total_seconds():.2f} s, when "
            f"{started_after_others_done} of {len(limited)} of {limited_key} had not started"
        )
        assert running_at_once == 2  # never above the limit, and the limit is used
        assert in_flight_at_once <= 2
        assert len(limited_executors) >= 2, "the limited key ran on one executor only"
        # The others are not held back by the limited key's backlog.
        assert others_at_once > 2
        assert started_after_others_done >= len(limited) // 3
    finally:
        stop_together(started)
        for worker in started:
            stack.executors.remove(worker)


def test_a_flood_of_one_key_ahead_runs_one_at_a_time_in_order_while_other_work_flows(
    stack, rules, unique
):
    """One key's flood, ahead of everything else (priority 9), limited to one at a time: the
    dispatcher sets it aside (limits.py) and gives it back a job at a time, so it runs in
    line order and the other work is not held back behind it."""
    settled_executors(stack)
    tag = f"t{unique}"
    rules.limit(f"{tag}-flood", max_running=1)
    flood = submit(
        [
            {
                "jobType": "SIMULATION",
                "priority": 9,
                "concurrencyKey": f"{tag}-flood",
                "payload": {"steps": [{"action": "SLEEP", "durationMs": 100}]},
            }
            for _ in range(40)
        ]
    )
    others = submit([sleep_job() for _ in range(12)])

    wait_all_completed(flood + others, timeout=60)
    assert_each_ran_exactly_once(flood + others)

    flood_attempts = sorted(
        ExecutionAttempt.objects.filter(job_id__in=flood), key=lambda a: a.started_at
    )
    due = dict(JobExecution.objects.filter(job_id__in=flood).values_list("job_id", "next_run_at"))
    line_order = [due[a.job_id] for a in flood_attempts]
    others_done = max(
        ExecutionAttempt.objects.filter(job_id__in=others).values_list("finished_at", flat=True)
    )
    flood_done = flood_attempts[-1].finished_at
    print(
        f"\nflood of 40 at 1 running: others done {(flood_done - others_done).total_seconds():.2f}"
        " s before the flood's last"
    )
    assert max_overlap([(a.started_at, a.finished_at) for a in flood_attempts]) == 1
    assert line_order == sorted(line_order)  # one after the other, in line order
    # One at a time, the flood takes at least 4 s; the others (four waves of 0.3 s at most on
    # the threads the flood leaves) finish well before unless the flood holds them back.
    assert others_done < flood_done
    assert not JobExecution.objects.filter(job_id__in=flood, set_aside=True).exists()


# --- per-key rate limit ---------------------------------------------------------------------


def test_a_rate_limit_sends_at_most_five_of_a_key_in_any_second(stack, rules, unique):
    settled_executors(stack)
    tag = f"t{unique}"
    rules.limit(f"{tag}-rate-*", max_per_second=5)
    key = f"{tag}-rate-1"
    job_ids = submit([sleep_job(concurrencyKey=key) for _ in range(20)])

    wait_all_completed(job_ids, timeout=60)
    assert_each_ran_exactly_once(job_ids)

    executions = JobExecution.objects.filter(job_id__in=job_ids)
    # The limit applies to dispatches (limits.py: "sent in any second"), stamped under the
    # dispatch lock: that is what is guaranteed. A start also waits for Kafka and a free
    # thread, so starts may bunch up; they are only reported.
    sent = list(executions.values_list("dispatched_at", flat=True))
    starts = list(
        ExecutionAttempt.objects.filter(job_id__in=job_ids).values_list("started_at", flat=True)
    )
    sent_in_a_window = max_in_window(sent, RATE_WINDOW_SECONDS)
    span = (max(sent) - min(sent)).total_seconds()
    print(
        f"\nrate limit 5/s: at most {sent_in_a_window} of 20 sent in any 1 s window, all sent "
        f"within {span:.2f} s; at most {max_in_window(starts, RATE_WINDOW_SECONDS)} started "
        "in any 1 s window"
    )
    assert sent_in_a_window == 5  # never above the rate, and the rate is used
    # Four windows' worth: at least 3 s; and not throttled far below the rate either.
    assert 3.0 <= span <= 8.0


# --- pause and resume -----------------------------------------------------------------------


def live_slots() -> int:
    return sum(executor.slots for executor in flow.live_executors())


def pause_mid_backlog_then_resume(
    rules: Rules, *, scope: str, name: str, job_ids: list, control: list[dict]
) -> None:
    """Pause `scope` `name` while its backlog `job_ids` is being worked off with deliveries
    sent and waiting for a thread; check nothing more of it starts while `control` jobs (not
    paused) run, then resume and check it all ran once."""

    def count(status: str) -> int:
        return statuses(job_ids)[status]

    # The pause must come while a delivery waits for a thread. Seen waiting, deliveries can all
    # start before the pause commits (a thread freed at the end of a wave takes them within
    # milliseconds, and the refill lags by the wake-up's fold): a pause that found none waiting
    # is lifted, and made again the next time one waits.
    for _ in range(5):
        wait_for(
            lambda: all(statuses(job_ids)[s] for s in ("RUNNING", "DISPATCHED", "COMPLETED")),
            timeout=60,
            interval=0.01,
            message="the backlog to run, with deliveries waiting for a thread",
        )
        paused_at = rules.pause(scope, name).paused_at
        committed_at = db_now()
        # Sent but not started when the pause took them back: PENDING again, sent before.
        recalled = set(
            JobExecution.objects.filter(
                job_id__in=job_ids, status="PENDING", dispatched_at__isnull=False
            ).values_list("job_id", flat=True)
        )
        if recalled:
            break
        queue_resume(scope=scope, name=name)
    assert recalled, "no delivery was waiting when any of 5 pauses came: nothing was recalled"

    # The running ones finish; then nothing of the paused work moves while other work runs.
    wait_for(
        lambda: not (count("RUNNING") or count("DISPATCHED")),
        timeout=30,
        interval=0.05,
        message="the work running at the pause to finish",
    )
    attempts = ExecutionAttempt.objects.filter(job_id__in=job_ids)
    attempts_when_quiet, finished_when_quiet = attempts.count(), count("COMPLETED")
    control_ids = submit(control)
    observed_from = time.monotonic()
    while True:  # "nothing happens": a bounded window, and at least until the control ran
        assert attempts.count() == attempts_when_quiet
        assert statuses(job_ids) == {
            "COMPLETED": finished_when_quiet,
            "PENDING": len(job_ids) - finished_when_quiet,
        }
        waited = time.monotonic() - observed_from
        if waited >= 2.0 and statuses(control_ids)["COMPLETED"] == len(control_ids):
            break
        assert waited < 30, f"control jobs not done while paused: {dict(statuses(control_ids))}"
        time.sleep(0.1)

    last_start = attempts.aggregate(last=Max("started_at"))["last"]
    # Work of a paused queue is sent only by a claim that began before the pause committed, so
    # an attempt started after that commit ran a delivery the recall should have taken back.
    not_recalled = sorted(
        (attempt.started_at - paused_at).total_seconds()
        for attempt in attempts.filter(started_at__gt=committed_at)
    )
    print(
        f"\npause of {scope} {name}: {attempts_when_quiet} of {len(job_ids)} started before it, "
        f"the last {(last_start - paused_at).total_seconds() * 1000:+.0f} ms from the pause; "
        f"{len(recalled)} recalled, {len(not_recalled)} started after its commit; "
        f"{len(job_ids) - finished_when_quiet} held for {waited:.1f} s while "
        f"{len(control_ids)} control jobs ran"
    )
    assert last_start <= paused_at + timedelta(seconds=1)
    assert not attempts.filter(job_id__in=recalled).exists()
    assert not attempts.exclude(outcome="SUCCESS").exists()  # nothing LOST or FAILED
    assert_each_ran_exactly_once(control_ids)

    assert queue_resume(scope=scope, name=name) is True
    wait_all_completed(job_ids, timeout=60)
    assert_each_ran_exactly_once(job_ids)
    assert not not_recalled, (
        f"{len(not_recalled)} deliveries sent before the pause committed were neither started "
        f"before it nor recalled; they started {not_recalled} s after the pause"
    )


def test_pausing_a_queue_mid_backlog_starts_nothing_more_until_resume(stack, rules, unique):
    settled_executors(stack)
    bulk = "paused-bulk"  # one of the test stack's queues (settings_test), this test's alone
    # Enough that the executors' credits (twice their slots) leave work waiting in PostgreSQL.
    count = max(40, 4 * live_slots())
    job_ids = submit([sleep_job(queueName=bulk) for _ in range(count)])
    pause_mid_backlog_then_resume(
        rules,
        scope="QUEUE",
        name=bulk,
        job_ids=job_ids,
        control=[sleep_job(queueName="paused-other") for _ in range(4)],
    )


def test_pausing_a_job_type_mid_backlog_starts_nothing_more_until_resume(stack, rules):
    settled_executors(stack)
    task = {"jobType": "TASK", "payload": {"task": SLEEP_TASK, "kwargs": {"seconds": 0.3}}}
    job_ids = submit([task] * max(16, 3 * live_slots()))
    pause_mid_backlog_then_resume(
        rules,
        scope="JOB_TYPE",
        name="TASK",
        job_ids=job_ids,
        control=[sleep_job() for _ in range(4)],  # SIMULATION jobs still run
    )


def test_deliveries_claimed_while_the_pause_commits_do_not_start_after_it(stack, rules, unique):
    """The race the backlog tests above meet only sometimes, made certain: a claim that read
    the rules before the pause and commits after it. The test is that dispatcher: it claims and
    publishes in its own transaction, the pause comes in before its commit, and real executors
    receive the deliveries. Whatever the order the database then chooses, an attempt of the
    paused queue may only have started before the pause committed."""
    settled_executors(stack)
    queue = "paused-race"  # one of the test stack's queues (settings_test), this test's alone
    later = db_now() + timedelta(hours=1)  # not due: only this test's claim sends them
    job_ids = submit([sleep_job(queueName=queue, runAt=later.isoformat()) for _ in range(3)])
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pausing_backend = cursor.fetchone()[0]

    def pause_committed_or_waiting_for_a_lock() -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity"
                " WHERE pid = %s AND wait_event_type = 'Lock')",
                [pausing_backend],
            )
            waiting = cursor.fetchone()[0]
        return waiting or Pause.objects.filter(scope="QUEUE", name=queue).exists()

    claimed = threading.Event()

    def dispatcher() -> list:
        try:
            with transaction.atomic():
                sent = dispatch_due_jobs(now=later + timedelta(minutes=1), job_ids=job_ids)
                claimed.set()
                # Commit once the pause has committed, or waits for this transaction's locks.
                wait_for(
                    pause_committed_or_waiting_for_a_lock,
                    timeout=30,
                    message="the pause to commit or to wait for the claim",
                )
            return sent
        finally:
            claimed.set()
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        racing = pool.submit(dispatcher)
        assert claimed.wait(30)
        rules.pause("QUEUE", queue)
        committed_at = db_now()
        sent = racing.result(timeout=60)
    assert sorted(sent) == sorted(job_ids)

    # Each delivery reaches an executor: it starts there, or is fenced off (it was recalled).
    def resolved() -> bool:
        started = set(
            ExecutionAttempt.objects.filter(job_id__in=job_ids).values_list("job_id", flat=True)
        )
        logs = "".join(worker.log_text() for worker in stack.executors)
        return all(
            job_id in started or f"of job {job_id} is stale or a duplicate (fenced)" in logs
            for job_id in job_ids
        )

    wait_for(resolved, timeout=30, interval=0.1, message="every delivery to start or be fenced")
    late = [
        (attempt.started_at - committed_at).total_seconds()
        for attempt in ExecutionAttempt.objects.filter(job_id__in=job_ids)
    ]
    print(f"\nclaim racing the pause: attempts started {late} s from the pause's commit")
    assert all(seconds < 0 for seconds in late), (
        f"deliveries of a claim racing the pause started {late} s after the pause committed"
    )

    assert queue_resume(scope="QUEUE", name=queue) is True
    for recalled in JobExecution.objects.filter(job_id__in=job_ids, status="PENDING"):
        execution_run_now(job_id=recalled.job_id)  # their runAt is an hour away
    wait_all_completed(job_ids, timeout=30)
    assert_each_ran_exactly_once(job_ids)
