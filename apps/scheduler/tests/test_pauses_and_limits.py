"""Pauses and per-key limits as the dispatcher applies them, on the real PostgreSQL.

No worker runs here: `dispatch` claims with a publish function that only records, and the tests
play the worker's part through the executor's services. The same rules with real executors:
tests/integration/test_pauses_and_limits.py.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import transaction

from jobweaver.core.errors import InvalidRequest
from jobweaver.engine import claim
from jobweaver.engine.claim import rules as limits
from jobweaver.engine.keys import scoped_key
from jobweaver.engine.store import claim as claim_rows
from jobweaver.executor.services import attempt_finish, attempt_start
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.invariants import check_invariants
from jobweaver.scheduler.models import ConcurrencyLimit, ExecutionStatus, JobExecution, Pause
from jobweaver.scheduler.services import (
    concurrency_limit_delete,
    concurrency_limit_set,
    execution_cancel,
    queue_pause,
    queue_resume,
)
from jobweaver.scheduler.tests.factories import WORKER, execution_of, live_executor, submitted_job

pytestmark = pytest.mark.django_db


def dispatch() -> set[uuid.UUID]:
    live_executor()
    return set(dispatch_due_jobs(publish=lambda messages: None))


def jobs(count: int, **fields) -> set[uuid.UUID]:
    return {submitted_job([{"action": "LOG", "message": "x"}], **fields).id for _ in range(count)}


def finish(job_id: uuid.UUID) -> None:
    execution = execution_of(job_id)
    claimed = attempt_start(job_id=job_id, event_id=execution.current_event_id, worker_id=WORKER)
    assert claimed is not None
    assert attempt_finish(
        claimed=claimed, outcome="SUCCESS", error="", steps_completed=1, log_lines=[]
    )


def no_violations():
    assert check_invariants() == []


def server_key(key: str) -> str:
    """The key an execution of a job without an owner carries (apps/engine/keys.py): these
    tests submit as code does, with the server's authority."""
    return scoped_key(None, key)


# --- pause and resume ---------------------------------------------------------------------------


def test_a_paused_queue_starts_nothing_and_other_queues_flow_until_resume():
    emails = jobs(3, queueName="emails")
    reports = jobs(2, queueName="reports")
    queue_pause(scope="QUEUE", name="emails", reason="mail server down", paused_by="ops")

    assert dispatch() == reports
    assert {execution_of(j).status for j in emails} == {ExecutionStatus.PENDING}

    assert queue_resume(scope="QUEUE", name="emails") is True
    assert dispatch() == emails
    no_violations()


# How far the claim looks down the one line while something is paused before it reads the line
# per queue and job type (the claim's _due_per_open_line): each way must claim the same. With a
# look of 1 the paused work on top always sends the claim line by line; 32 (the default) sees
# all of these tests' work at once; in between, the look finds some open work but too little.
LOOK_AHEADS = pytest.mark.parametrize(
    "look_ahead", [1, 5, claim_rows.LOOK_AHEAD_ROWS], ids=["by-line", "look-short", "look"]
)


def test_while_a_queue_is_paused_the_other_queues_of_its_pool_share_the_credits(settings):
    """A pool serving a paused queue and two open ones: the open queues share its credits
    (apps/engine/claim/queues.py: equal weights, so turn by turn), each taking its best work
    first, and the paused queue takes none."""
    settings.JOBWEAVER_DISPATCH_PREFETCH = 1
    paused = [submitted_job(queueName="bulk", priority=9).id for _ in range(5)]
    queue_pause(scope="QUEUE", name="bulk")
    a = {p: submitted_job(queueName="a", priority=p).id for p in (3, 7, 5)}
    b = {p: submitted_job(queueName="b", priority=p).id for p in (8, 1, 6)}
    live_executor(slots=3)

    assert dispatch_due_jobs(publish=lambda messages: None) == [b[8], a[7], b[6]]
    waiting = [*paused, a[3], a[5], b[1]]
    assert {execution_of(j).status for j in waiting} == {ExecutionStatus.PENDING}

    live_executor(slots=6)
    assert dispatch_due_jobs(publish=lambda messages: None) == [a[5], a[3], b[1]]
    assert {execution_of(j).status for j in paused} == {ExecutionStatus.PENDING}
    no_violations()


def test_a_paused_job_type_starts_none_of_its_jobs():
    simulations = jobs(2)
    queue_pause(scope="JOB_TYPE", name="SIMULATION")
    assert dispatch() == set()
    queue_resume(scope="JOB_TYPE", name="SIMULATION")
    assert dispatch() == simulations


def task_job(**fields):
    payload = {"task": "jobweaver_site.examples.tasks.add", "args": [1, 2]}
    return job_submit(spec=parse_job_request({"jobType": "TASK", "payload": payload, **fields}))


@LOOK_AHEADS
@pytest.mark.parametrize("queue_paused", [False, True], ids=["", "and-a-queue"])
def test_while_a_job_type_is_paused_a_pool_takes_its_queues_open_work_by_priority(
    settings, monkeypatch, queue_paused, look_ahead
):
    """A paused job type's work ahead of everything else in the one queue a pool serves, and
    another queue's work ahead too (paused or not): the claim, looking down the line or reading
    it per queue and job type, takes the pool's best open work up to its credits, in priority
    order, and none of the paused; a resume lets that go first again."""
    monkeypatch.setattr(claim_rows, "LOOK_AHEAD_ROWS", look_ahead)
    settings.JOBWEAVER_DISPATCH_PREFETCH = 1
    tasks = [task_job(queueName="a", priority=9).job.id for _ in range(3)]
    queue_pause(scope="JOB_TYPE", name="TASK")
    bulk = [submitted_job(queueName="bulk", priority=9).id for _ in range(2)]
    if queue_paused:
        queue_pause(scope="QUEUE", name="bulk")
    a = {p: submitted_job(queueName="a", priority=p).id for p in (3, 7, 5, 8)}
    live_executor(slots=3, queues=["a"])

    assert dispatch_due_jobs(publish=lambda messages: None) == [a[8], a[7], a[5]]
    assert {execution_of(j).status for j in tasks} == {ExecutionStatus.PENDING}

    live_executor(slots=9, queues=["a"])
    assert dispatch_due_jobs(publish=lambda messages: None) == [a[3]]
    assert {execution_of(j).status for j in [*tasks, *bulk]} == {ExecutionStatus.PENDING}

    queue_resume(scope="JOB_TYPE", name="TASK")
    live_executor(slots=20, queues=["a"])
    assert set(dispatch_due_jobs(publish=lambda messages: None)) == set(tasks)
    no_violations()


def test_pause_takes_back_sent_deliveries_and_lets_running_work_finish():
    running, sent = sorted(jobs(2, queueName="q1"))
    dispatch()
    token_of_sent = execution_of(sent).current_event_id
    claimed = attempt_start(
        job_id=running, event_id=execution_of(running).current_event_id, worker_id=WORKER
    )

    queue_pause(scope="QUEUE", name="q1")

    recalled = execution_of(sent)
    assert recalled.status == ExecutionStatus.PENDING
    assert recalled.current_event_id is None and recalled.attempt_count == 0
    # The message still on Kafka is fenced off: its worker cannot start it.
    assert attempt_start(job_id=sent, event_id=token_of_sent, worker_id=WORKER) is None
    # The running attempt goes on and finishes.
    assert execution_of(running).status == ExecutionStatus.RUNNING
    assert attempt_finish(
        claimed=claimed, outcome="SUCCESS", error="", steps_completed=1, log_lines=[]
    )
    assert execution_of(running).status == ExecutionStatus.COMPLETED
    no_violations()


def test_pause_and_resume_are_idempotent():
    first = queue_pause(scope="QUEUE", name="q2", reason="first")
    again = queue_pause(scope="QUEUE", name="q2", reason="second")
    assert again.pk == first.pk and again.reason == "first"
    assert queue_resume(scope="QUEUE", name="q2") is True
    assert queue_resume(scope="QUEUE", name="q2") is False
    assert not Pause.objects.exists()


@pytest.mark.parametrize(
    ("scope", "name"),
    [
        ("TOPIC", "emails"),
        ("QUEUE", ""),
        ("QUEUE", "has space"),
        ("QUEUE", "x" * 101),
        ("QUEUE", None),
        ("JOB_TYPE", "NOPE"),
        ("JOB_TYPE", "simulation"),
    ],
)
def test_a_bad_pause_is_refused_and_changes_nothing(scope, name):
    with pytest.raises(InvalidRequest):
        queue_pause(scope=scope, name=name)
    assert not Pause.objects.exists()


# --- concurrency and rate limits ----------------------------------------------------------------


@pytest.mark.parametrize("paused_queue", [False, True], ids=["", "with-a-paused-queue"])
def test_at_most_n_running_per_key_while_other_keys_and_unkeyed_work_flow(paused_queue):
    # With a queue paused the claim reads per queue and job type
    # (the claim's _due_per_open_line): the limits must apply the same.
    held = jobs(3, queueName="bulk", concurrencyKey="customer-1") if paused_queue else set()
    if paused_queue:
        queue_pause(scope="QUEUE", name="bulk")
    concurrency_limit_set(pattern="customer-*", max_running=2, max_per_second=None)
    first = jobs(5, concurrencyKey="customer-1")
    second = jobs(3, concurrencyKey="customer-2")
    free = jobs(4)
    unmatched = jobs(3, concurrencyKey="internal")

    sent = dispatch()
    assert len(sent & first) == 2 and len(sent & second) == 2
    assert free | unmatched <= sent
    assert dispatch() == set()  # both keys are at their limit

    finish(next(iter(sent & first)))
    more = dispatch()
    assert len(more) == 1 and more <= first
    assert {execution_of(j).status for j in held} <= {ExecutionStatus.PENDING}
    no_violations()


def test_tenants_whose_work_came_in_one_after_another_each_get_their_limit_in_one_dispatch(
    settings,
):
    """The multi-tenant case: a key per customer, one job each at a time, each customer's
    jobs submitted together. The claim's window (the credits) is first full of one customer's
    jobs; one dispatch must still start one job of every customer, up to the credits, not one
    job in all and the rest at the next wake-up."""
    settings.JOBWEAVER_DISPATCH_PREFETCH = 1
    concurrency_limit_set(pattern="customer-*", max_running=1, max_per_second=None)
    customers = [jobs(20, concurrencyKey=f"customer-{n}") for n in range(12)]
    live_executor(slots=10)

    sent = set(dispatch_due_jobs(publish=lambda messages: None))

    assert [len(sent & work) for work in customers] == [1] * 10 + [0] * 2
    assert dispatch_due_jobs(publish=lambda messages: None) == []  # the credits are spent
    no_violations()


def test_a_blocked_keys_work_atop_the_line_does_not_cut_a_paused_time_claim_short(monkeypatch):
    """While anything is paused the claim first looks down the line (claim_rows.LOOK_AHEAD_ROWS
    rows). Work of a key at its limit, not yet set aside, may fill that look: it must not count
    as open work found, or the claim takes only what else the look saw and leaves the credits
    unspent."""
    monkeypatch.setattr(claim_rows, "LOOK_AHEAD_ROWS", 4)
    concurrency_limit_set(pattern="customer-*", max_running=1, max_per_second=None)
    live_executor(slots=10)
    in_flight = jobs(1, concurrencyKey="customer-1", priority=9)
    assert set(dispatch_due_jobs(publish=lambda messages: None)) == in_flight
    jobs(3, concurrencyKey="customer-1", priority=9)  # at the top of the line, blocked
    queue_pause(scope="QUEUE", name="elsewhere")
    open_work = jobs(3, priority=5)

    with transaction.atomic():
        # The claim alone: a full dispatch would set the blocked key's work aside first.
        claimed = claim.executions_claim(
            limit=3, rules=limits.dispatch_rules(), workers=[WORKER] * 3
        )
    assert {claim.job_id for claim in claimed} == open_work


def test_the_most_specific_pattern_wins_and_an_exact_key_is_a_pattern_too():
    concurrency_limit_set(pattern="customer-*", max_running=1, max_per_second=None)
    concurrency_limit_set(pattern="customer-vip", max_running=3, max_per_second=None)
    vip = jobs(5, concurrencyKey="customer-vip")
    plain = jobs(5, concurrencyKey="customer-7")
    sent = dispatch()
    assert len(sent & vip) == 3 and len(sent & plain) == 1


def test_at_most_r_sent_per_second_per_key():
    concurrency_limit_set(pattern="burst", max_running=None, max_per_second=3)
    burst = jobs(8, concurrencyKey="burst")
    sent = dispatch()
    assert len(sent) == 3
    assert dispatch() == set()  # within the same second
    # A second later (moved back in time rather than slept through), three more may go.
    JobExecution.objects.filter(job_id__in=sent).update(
        dispatched_at=execution_of(next(iter(sent))).dispatched_at - timedelta(seconds=2)
    )
    later = dispatch()
    assert len(later) == 3 and later <= burst - sent


def test_a_key_at_its_limit_does_not_hold_back_lower_priority_work():
    concurrency_limit_set(pattern="hog", max_running=1, max_per_second=None)
    jobs(30, concurrencyKey="hog", priority=9)
    others = jobs(5, priority=1)
    first = dispatch()
    second = dispatch()
    # The first batch's scan is full of the hog's rows, one is taken; from then on the hog is
    # left out of the scan and the others go.
    assert others <= first | second
    hog = server_key("hog")
    assert len(JobExecution.objects.filter(concurrency_key=hog, status="DISPATCHED")) == 1


def test_removing_a_limit_releases_the_waiting_work():
    concurrency_limit_set(pattern="k", max_running=1, max_per_second=None)
    keyed = jobs(4, concurrencyKey="k")
    assert len(dispatch()) == 1
    assert concurrency_limit_delete(pattern="k") is True
    assert concurrency_limit_delete(pattern="k") is False
    assert len(dispatch()) == 3
    assert {execution_of(j).status for j in keyed} == {ExecutionStatus.DISPATCHED}


def set_aside(job_ids) -> set[uuid.UUID]:
    return set(
        JobExecution.objects.filter(job_id__in=job_ids, set_aside=True).values_list(
            "job_id", flat=True
        )
    )


def test_a_flood_of_a_key_at_its_limit_leaves_the_line_and_comes_back_in_its_order():
    """One key's backlog ahead of everything else (a higher priority, submitted first): once
    the key is at its limit its waiting work is set aside, so no claim reads it, and each time
    the key has room again its next job in line order goes."""
    concurrency_limit_set(pattern="hog", max_running=1, max_per_second=None)
    hog = [
        submitted_job([{"action": "LOG", "message": "x"}], concurrencyKey="hog", priority=9).id
        for _ in range(12)
    ]
    others = jobs(5, priority=5)

    first = dispatch()
    assert first == {hog[0]} | others  # the key's room is one
    # Its claim left the key's other jobs for its limit, so the dispatcher claimed again, found
    # the key at its limit and set them aside: out of the line.
    assert set_aside(hog) == set(hog[1:])
    assert dispatch() == set()

    sent_in_turn = []
    for running in hog[:-1]:
        finish(running)
        sent = dispatch()
        assert len(sent) == 1
        sent_in_turn.extend(sent)
    assert sent_in_turn == hog[1:]  # submission order within the priority, as in line
    assert set_aside(hog) == set()
    no_violations()


def test_a_new_job_does_not_overtake_its_keys_set_aside_work_on_the_fast_path():
    concurrency_limit_set(pattern="k", max_running=1, max_per_second=None)
    first, *older = [submitted_job(concurrencyKey="k").id for _ in range(3)]
    assert dispatch() == {first}
    dispatch()
    assert set_aside(older) == set(older)
    new = submitted_job(concurrencyKey="k").id  # its own fast path: the key is at its limit
    finish(first)

    # The key has room; the fast path after a submit would take the new job, ahead of the
    # older ones waiting aside.
    assert dispatch_due_jobs(job_ids=[new], publish=lambda messages: None) == []
    assert dispatch() == {older[0]}


def test_a_key_with_room_gets_back_only_what_its_room_lacks_in_line():
    """Two dispatches in a row whose credits went to other work: the key's job put back by the
    first is still in line, so the second puts back nothing (it put back one more each time,
    and the claim then set the extra ones aside again once the key was sent)."""
    concurrency_limit_set(pattern="k", max_running=1, max_per_second=None)
    first, *older = [submitted_job(concurrencyKey="k").id for _ in range(4)]
    assert dispatch() == {first}
    assert set_aside(older) == set(older)
    finish(first)
    room = limits.DispatchRules(put_back=((server_key("k"), 1),))

    with transaction.atomic():
        assert claim.executions_put_back(room) == 1
    with transaction.atomic():
        assert claim.executions_put_back(room) == 0
    assert set_aside(older) == set(older[1:])
    assert dispatch() == {older[0]}


def test_a_keys_better_work_goes_back_in_line_ahead_of_its_worse_work_already_there():
    concurrency_limit_set(pattern="k", max_running=1, max_per_second=None)
    first, *older = [submitted_job(concurrencyKey="k", priority=5).id for _ in range(3)]
    assert dispatch() == {first}
    assert set_aside(older) == set(older)
    worse = submitted_job(concurrencyKey="k", priority=1).id  # waits in line, not aside
    better = submitted_job(concurrencyKey="k", priority=9).id
    dispatch()
    assert set_aside([worse, better]) == {worse, better}
    finish(first)
    with transaction.atomic():
        JobExecution.objects.filter(job_id=worse).update(set_aside=False)

    # The key's room is one: its best job goes, wherever it waited.
    assert dispatch() == {better}
    finish(better)
    assert dispatch() == {older[0]}


@pytest.mark.parametrize("rate", [None, 100], ids=["max-running", "and-a-rate"])
def test_a_dispatch_sets_aside_only_for_blocked_keys_with_work_in_line(rate):
    concurrency_limit_set(pattern="*", max_running=1, max_per_second=rate)
    busy = submitted_job(concurrencyKey="busy").id
    done = submitted_job(concurrencyKey="done").id
    assert dispatch() == {busy, done}
    finish(done)

    def rules():
        with transaction.atomic():
            return limits.dispatch_rules()

    assert rules().blocked_keys == (server_key("busy"),)
    assert rules().set_aside_now == ()  # nothing of it waits in line: no set-aside statement
    waiting = submitted_job(concurrencyKey="busy").id
    assert rules().set_aside_now == (server_key("busy"),)
    assert dispatch() == set()
    assert set_aside([waiting]) == {waiting}
    assert rules().set_aside_now == ()


@pytest.mark.parametrize("probe", [1, claim_rows.IN_LINE_PROBE_ROWS])
def test_a_keys_work_goes_in_priority_order_however_little_of_its_line_is_probed(
    monkeypatch, probe
):
    """A key with more work in line than put_back reads of it (a flood still being set
    aside): whichever rows it read, the key's best job is the one sent."""
    monkeypatch.setattr(claim_rows, "IN_LINE_PROBE_ROWS", probe)
    concurrency_limit_set(pattern="k", max_running=1, max_per_second=None)
    first = submitted_job(concurrencyKey="k").id
    assert dispatch() == {first}
    middle = submitted_job(concurrencyKey="k", priority=5).id
    dispatch()
    assert set_aside([middle]) == {middle}
    worst = submitted_job(concurrencyKey="k", priority=1).id  # in line: the key's turn
    best = submitted_job(concurrencyKey="k", priority=9).id  # comes after the dispatch
    finish(first)

    assert dispatch() == {best}
    finish(best)
    assert dispatch() == {middle}
    finish(middle)
    assert dispatch() == {worst}


@pytest.mark.django_db(transaction=True)  # NOTIFY is delivered when a transaction commits
def test_a_new_job_left_by_the_fast_path_wakes_the_full_dispatch():
    """The key has room and only paused work set aside: the fast path still leaves the new job
    to a full dispatch (it cannot tell where the set-aside work is), so it must wake one."""
    from jobweaver.core.db import listen_connection

    concurrency_limit_set(pattern="k", max_running=1, max_per_second=None)
    live_executor()
    running = submitted_job(concurrencyKey="k").id  # its fast path sends it
    paused = submitted_job(concurrencyKey="k", queueName="bulk").id
    assert dispatch() == set()
    assert set_aside([paused]) == {paused}
    queue_pause(scope="QUEUE", name="bulk")
    finish(running)

    with listen_connection() as listener:
        listener.execute("LISTEN jobweaver_dispatch")
        new = submitted_job(concurrencyKey="k").id
        assert execution_of(new).status == ExecutionStatus.PENDING
        assert list(listener.notifies(timeout=5, stop_after=1)), "no wake-up was sent"
    assert dispatch() == {new}


def test_later_work_of_a_key_at_its_limit_is_set_aside_too_and_a_batch_at_a_time(monkeypatch):
    monkeypatch.setattr(limits, "SET_ASIDE_BATCH", 4)
    concurrency_limit_set(pattern="hog", max_running=1, max_per_second=None)
    running = jobs(1, concurrencyKey="hog")
    assert dispatch() == running
    flood = jobs(10, concurrencyKey="hog", priority=9)
    later = jobs(2)

    assert dispatch() == later
    assert len(set_aside(flood)) == 4  # a dispatch holds the lock for a bounded time
    dispatch()
    dispatch()
    assert set_aside(flood) == flood


def test_set_aside_work_goes_back_in_line_when_its_limit_is_removed(monkeypatch):
    monkeypatch.setattr(limits, "PUT_BACK_BATCH", 3)
    concurrency_limit_set(pattern="k", max_running=1, max_per_second=None)
    keyed = jobs(7, concurrencyKey="k")
    assert len(dispatch()) == 1
    dispatch()
    assert len(set_aside(keyed)) == 6
    assert concurrency_limit_delete(pattern="k") is True

    assert len(dispatch()) == 3  # a batch at a time
    assert len(dispatch()) == 3
    assert {execution_of(j).status for j in keyed} == {ExecutionStatus.DISPATCHED}
    no_violations()


def test_a_rate_limited_key_gets_its_set_aside_work_back_when_the_window_passes():
    concurrency_limit_set(pattern="burst", max_running=None, max_per_second=2)
    burst = jobs(6, concurrencyKey="burst")
    sent = dispatch()
    assert len(sent) == 2
    assert dispatch() == set()
    assert set_aside(burst) == burst - sent
    JobExecution.objects.filter(job_id__in=sent).update(  # a second later, without sleeping
        dispatched_at=execution_of(next(iter(sent))).dispatched_at - timedelta(seconds=2)
    )
    later = dispatch()
    assert len(later) == 2 and later <= burst - sent


def test_set_aside_work_can_be_cancelled_at_once():
    concurrency_limit_set(pattern="k", max_running=1, max_per_second=None)
    keyed = jobs(3, concurrencyKey="k")
    assert len(dispatch()) == 1
    dispatch()
    aside = set_aside(keyed)
    assert len(aside) == 2

    victim = next(iter(aside))
    assert execution_cancel(job_id=victim).status == ExecutionStatus.CANCELLED
    no_violations()


def test_a_keys_paused_work_waits_in_line_while_its_open_work_is_set_aside_and_goes_first():
    """A key at its limit has work in a paused queue, of a paused job type, and in an open
    queue, the paused work ahead in line. The open work is set aside and, each time the key has
    room, its best job goes; the paused work stays in line, never set aside, and goes in its
    order after the resumes."""
    concurrency_limit_set(pattern="k", max_running=1, max_per_second=None)
    running = jobs(1, concurrencyKey="k")
    assert dispatch() == running
    bulk = [submitted_job(concurrencyKey="k", queueName="bulk", priority=9).id for _ in range(2)]
    task = task_job(concurrencyKey="k", priority=8).job.id
    mail = [submitted_job(concurrencyKey="k", queueName="mail", priority=p).id for p in (5, 6)]
    queue_pause(scope="QUEUE", name="bulk")
    queue_pause(scope="JOB_TYPE", name="TASK")
    assert dispatch() == set()
    assert set_aside([*bulk, task, *mail]) == set(mail)

    sent_in_turn = []
    for previous in [*running, mail[1]]:
        finish(previous)
        sent = dispatch()
        assert len(sent) == 1
        sent_in_turn.extend(sent)
    assert sent_in_turn == [mail[1], mail[0]]  # priority 6, then 5; the paused 9s and 8 wait
    finish(mail[0])
    assert dispatch() == set()
    assert set_aside([*bulk, task]) == set()

    queue_resume(scope="QUEUE", name="bulk")
    assert dispatch() == {bulk[0]}
    finish(bulk[0])
    assert dispatch() == {bulk[1]}
    finish(bulk[1])
    queue_resume(scope="JOB_TYPE", name="TASK")
    assert dispatch() == {task}
    no_violations()


def test_work_set_aside_before_its_queue_was_paused_stays_aside_until_the_resume():
    concurrency_limit_set(pattern="k", max_running=1, max_per_second=None)
    running = jobs(1, concurrencyKey="k")
    assert dispatch() == running
    bulk = [submitted_job(concurrencyKey="k", queueName="bulk", priority=9).id for _ in range(2)]
    mail = submitted_job(concurrencyKey="k", queueName="mail").id
    dispatch()
    assert set_aside([*bulk, mail]) == {*bulk, mail}
    queue_pause(scope="QUEUE", name="bulk")

    finish(*running)
    assert dispatch() == {mail}  # the key's room goes to its open work
    finish(mail)
    assert dispatch() == set()
    queue_resume(scope="QUEUE", name="bulk")
    assert dispatch() == {bulk[0]}
    no_violations()


@pytest.mark.parametrize(
    ("pattern", "max_running", "max_per_second"),
    [
        ("k", None, None),
        ("k", 0, None),
        ("k", -1, None),
        ("k", True, None),
        ("k", "2", None),
        ("k", None, 10**7),
        ("", 1, None),
        ("x" * 256, 1, None),
        ("tab\there", 1, None),
    ],
)
def test_a_bad_limit_is_refused_and_changes_nothing(pattern, max_running, max_per_second):
    with pytest.raises(InvalidRequest):
        concurrency_limit_set(
            pattern=pattern, max_running=max_running, max_per_second=max_per_second
        )
    assert not ConcurrencyLimit.objects.exists()
