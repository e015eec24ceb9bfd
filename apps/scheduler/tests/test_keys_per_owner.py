"""Concurrency keys are per owner unless the limit is global (ARCHITECTURE §17, issue 35), as
the dispatcher applies them on the real PostgreSQL.

Before: a key was a free string counted across all users, so one tenant could submit another's
key ("customer-42") and use up its limited slots, or be blocked by it. Now two users' same key
are two keys, each with the limit; an operator's global limit makes every owner's (and the
ownerless) jobs of a key one key, for work submitted before the limit as well.

No worker runs here: `dispatch` claims with a publish function that only records, and the
tests play the worker's part through the executor's services.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from jobweaver.accounts.tests.helpers import make_user
from jobweaver.jobs.models import Job
from jobweaver.jobs.services import job_retry, job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.invariants import check_invariants
from jobweaver.scheduler.models import TERMINAL_STATUSES, ExecutionStatus, JobExecution
from jobweaver.scheduler.services import concurrency_limit_delete, concurrency_limit_set
from jobweaver.scheduler.tests.factories import execution_of, finished, live_executor
from jobweaver.scheduler.tests.test_pauses_and_limits import finish

pytestmark = pytest.mark.django_db

KEY = "customer-42"


def submit(user, count: int, key: str = KEY, **fields) -> list[uuid.UUID]:
    """`count` jobs of `user` (None: enqueued from code, no owner) with concurrency key `key`."""
    body = {
        "jobType": "SIMULATION",
        "payload": {"steps": [{"action": "LOG", "message": "x"}]},
        "concurrencyKey": key,
        **fields,
    }
    spec = parse_job_request(body)
    return [job_submit(spec=spec, submitted_by=user).job.id for _ in range(count)]


def dispatch() -> set[uuid.UUID]:
    live_executor()
    return set(dispatch_due_jobs(publish=lambda messages: None))


def keys_of(job_ids, *, unfinished: bool = False) -> set[str]:
    """The keys their executions carry (`unfinished`: of those not finished, which a change of
    the limits re-keys; a finished one keeps the key it ran with until it is retried)."""
    executions = JobExecution.objects.filter(job_id__in=job_ids)
    if unfinished:
        executions = executions.exclude(status__in=TERMINAL_STATUSES)
    return set(executions.values_list("concurrency_key", flat=True))


@pytest.fixture
def alice():
    return make_user("alice")


@pytest.fixture
def bob():
    return make_user("bob")


def test_two_users_with_the_same_key_each_get_their_limit(alice, bob):
    concurrency_limit_set(pattern="customer-*", max_running=1, max_per_second=None)
    alices, bobs = submit(alice, 3), submit(bob, 3)

    sent = dispatch()

    # Bob's jobs neither take Alice's slot nor wait for it: one running each.
    assert len(sent & set(alices)) == 1 and len(sent & set(bobs)) == 1
    assert dispatch() == set()
    finish(next(iter(sent & set(bobs))))
    assert len(dispatch() & set(bobs)) == 1
    # The job keeps the key as given; only its execution's key is scoped.
    assert set(
        Job.objects.filter(id__in=alices + bobs).values_list("concurrency_key", flat=True)
    ) == {KEY}
    assert keys_of(alices) == {f"{alice.pk}\x1f{KEY}"} and keys_of(bobs) == {f"{bob.pk}\x1f{KEY}"}
    assert check_invariants() == []


def test_a_global_limit_is_one_for_every_owner_and_the_ownerless(alice, bob):
    concurrency_limit_set(pattern="customer-*", max_running=1, max_per_second=None, is_global=True)
    everyone = submit(alice, 2) + submit(bob, 2) + submit(None, 2)

    first = dispatch()
    assert len(first) == 1
    assert dispatch() == set()
    finish(first.pop())
    assert len(dispatch()) == 1
    assert keys_of(everyone) == {f"\x1f{KEY}"}
    assert check_invariants() == []


def test_a_limit_made_global_holds_for_the_backlog_and_removed_gives_each_owner_their_key(
    alice, bob
):
    concurrency_limit_set(pattern="customer-*", max_running=1, max_per_second=None)
    jobs = {"alice": submit(alice, 3), "bob": submit(bob, 3), "server": submit(None, 2)}
    everyone = [job for owned in jobs.values() for job in owned]
    running = dispatch()
    assert len(running) == 3  # one of each owner, the server's authority counting as one
    dispatch()  # sets the waiting work of the three keys at their limit aside
    assert JobExecution.objects.filter(job_id__in=everyone, set_aside=True).count() == 5

    # An exact pattern, global: longer than "customer-*", it decides KEY's scope from now on.
    concurrency_limit_set(pattern=KEY, max_running=1, max_per_second=None, is_global=True)

    # Waiting, set aside and running alike now carry the one shared key.
    assert keys_of(everyone) == {f"\x1f{KEY}"}
    finish(running.pop())
    assert dispatch() == set()  # two of the shared key still run: over its limit of one
    for job_id in running:
        finish(job_id)
    (only,) = dispatch()
    owner_of_only = next(owner for owner, owned in jobs.items() if only in owned)

    assert concurrency_limit_delete(pattern=KEY) is True

    # Each owner's key is their own again, under the per-owner "customer-*": the two owners
    # with nothing running get one each; the one whose job runs, none.
    assert keys_of(jobs["alice"], unfinished=True) == {f"{alice.pk}\x1f{KEY}"}
    assert keys_of(jobs["bob"], unfinished=True) == {f"{bob.pk}\x1f{KEY}"}
    assert keys_of(jobs["server"], unfinished=True) == {f"\x1f{KEY}"}
    sent = dispatch()
    assert {owner for owner, owned in jobs.items() if sent & set(owned)} == {
        "alice",
        "bob",
        "server",
    } - {owner_of_only}
    assert len(sent) == 2
    assert check_invariants() == []


def test_the_longer_pattern_decides_and_of_two_as_long_the_global_one(alice, bob):
    concurrency_limit_set(pattern="customer-*", max_running=1, max_per_second=None, is_global=True)
    # Longer than the global pattern: per owner wins for the VIP key.
    concurrency_limit_set(pattern="customer-vip", max_running=1, max_per_second=None)
    # As long as the global pattern ("customer-*", 10 characters): the global one wins.
    concurrency_limit_set(pattern="*ustomer-7", max_running=5, max_per_second=None)
    vip = submit(alice, 2, "customer-vip") + submit(bob, 2, "customer-vip")
    seven = submit(alice, 2, "customer-7") + submit(bob, 2, "customer-7")
    eight = submit(alice, 2, "customer-8") + submit(bob, 2, "customer-8")

    sent = dispatch()

    assert len(sent & set(vip)) == 2  # one each
    assert len(sent & set(seven)) == 1  # one in all, not five each
    assert len(sent & set(eight)) == 1
    assert len(keys_of(vip)) == 2 and keys_of(seven) == {"\x1fcustomer-7"}


def test_a_retried_job_waits_with_the_key_todays_limits_give_it(alice):
    (failed,) = submit(alice, 1, maxRetryCount=0)
    finished(failed, outcome="FAILURE", error="boom")
    assert execution_of(failed).status == ExecutionStatus.FAILED
    concurrency_limit_set(pattern="customer-*", max_running=1, max_per_second=None, is_global=True)
    assert keys_of([failed]) == {f"{alice.pk}\x1f{KEY}"}  # finished work is not re-keyed

    job_retry(job_id=failed)

    assert keys_of([failed]) == {f"\x1f{KEY}"}  # so the global limit counts it
    assert check_invariants() == []


@pytest.mark.parametrize(
    "change",
    [
        lambda: concurrency_limit_set(pattern="customer-*", max_running=3, max_per_second=None),
        lambda: concurrency_limit_set(pattern="other-*", max_running=3, max_per_second=None),
        lambda: concurrency_limit_delete(pattern="customer-*"),
    ],
    ids=["replaced", "added", "removed"],
)
def test_a_change_of_per_owner_limits_alone_reads_no_execution(alice, change):
    concurrency_limit_set(pattern="customer-*", max_running=1, max_per_second=None)
    submit(alice, 2)
    # No global limit before or after: every key stays its owner's, nothing is re-keyed.
    with CaptureQueriesContext(connection) as captured:
        change()
    executions = JobExecution._meta.db_table
    assert not [query for query in captured.captured_queries if executions in query["sql"]]


@pytest.mark.django_db(transaction=True)
def test_a_submit_and_a_limit_made_global_meanwhile_do_not_race(alice):
    """Real concurrency: a keyed submit reads the limits and has not committed when an
    operator makes its key's limit global. The change waits for the submit's commit and then
    re-keys its job; without that, the job would keep its owner's key and escape the limit."""
    submitted, release = threading.Event(), threading.Event()
    job_ids: list[uuid.UUID] = []
    errors: list[BaseException] = []

    def submit_and_hold():
        try:
            with transaction.atomic():
                job_ids.extend(submit(alice, 1))
                submitted.set()
                release.wait(timeout=30)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connections.close_all()

    def make_global():
        try:
            concurrency_limit_set(
                pattern="customer-*", max_running=1, max_per_second=None, is_global=True
            )
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connections.close_all()

    submitter = threading.Thread(target=submit_and_hold)
    submitter.start()
    assert submitted.wait(timeout=30)
    change = threading.Thread(target=make_global)
    change.start()
    deadline = time.monotonic() + 10
    while not _waiting_for_an_advisory_lock() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _waiting_for_an_advisory_lock(), "the change did not wait for the submit"
    release.set()
    submitter.join(timeout=30)
    change.join(timeout=30)

    assert errors == []
    assert keys_of(job_ids) == {f"\x1f{KEY}"}


def _waiting_for_an_advisory_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        return cursor.fetchone()[0] > 0


def test_a_re_key_reads_the_unfinished_work_through_its_indexes_never_the_history(alice):
    """A change of scope re-keys under the dispatch lock: it must read the keyed work that
    waits or runs (partial indexes), not scan every execution kept for retention. Scans are
    discouraged (the test's table is small); a branch without an index would still scan."""
    submit(alice, 1)
    with CaptureQueriesContext(connection) as captured:
        concurrency_limit_set(
            pattern="customer-*", max_running=1, max_per_second=None, is_global=True
        )
    (rekey,) = [q["sql"] for q in captured.captured_queries if "WITH keyed AS" in q["sql"]]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {rekey}")
        plan = "\n".join(line for (line,) in cursor.fetchall())

    table = JobExecution._meta.db_table
    assert f"Seq Scan on {table}" not in plan and "Bitmap" not in plan, plan
    # Each kind of unfinished work through a partial index of unfinished rows (which one is
    # the planner's choice, by the statistics of the moment); the update by primary key.
    scans = [line for line in plan.splitlines() if "Scan using" in line and f" on {table}" in line]
    used = {line.split(" using ")[1].split(" on ")[0] for line in scans}
    assert len(scans) == 5 and len(used) >= 4, plan
    assert used <= {
        "jw_execution_key_line",
        "jw_execution_set_aside",
        "jw_execution_key_in_flight",
        "jw_execution_key_waiting",
        "jw_execution_pending_by_user",
        "jw_execution_live_leases",
        "jw_execution_pending_due",
        "jw_execution_due_work",
        "jw_execution_queue_line",
        f"{table}_pkey",
    }, plan
