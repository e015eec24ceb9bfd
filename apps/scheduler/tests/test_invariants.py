"""The invariant checker finds each kind of violation, built here by hand in the database, and
finds none in histories the services produce (retries, lost workers, operator retries).

`manage.py check_invariants` runs through `run_from_argv`, the path `manage.py` takes, so exit
codes and output are what a user in a shell sees.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from jobweaver.accounts.tests.helpers import make_user
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.invariants import Violation, check_invariants
from jobweaver.scheduler.management.commands.check_invariants import Command
from jobweaver.scheduler.models import ConcurrencyLimit, JobExecution
from jobweaver.scheduler.rescue import rescue_expired_leases
from jobweaver.scheduler.services import execution_retry
from jobweaver.scheduler.tests.factories import (
    dispatched,
    execution_of,
    finished,
    make_due,
    started,
    submitted_job,
)

pytestmark = pytest.mark.django_db


def found(job_id) -> list[tuple[str, str]]:
    return [(v.invariant, v.detail) for v in check_invariants(job_ids=[job_id])]


def attempt_like(previous: ExecutionAttempt, **changes) -> ExecutionAttempt:
    """Another attempt of the same job, by default the next one, a second later."""
    fields = {
        "event_id": uuid.uuid4(),
        "job_id": previous.job_id,
        "attempt": previous.attempt + 1,
        "trace_id": previous.trace_id,
        "worker_id": previous.worker_id,
        "started_at": previous.started_at + timedelta(seconds=1),
        "finished_at": previous.finished_at,
        "outcome": previous.outcome,
    }
    return ExecutionAttempt.objects.create(**{**fields, **changes})


def only_attempt(job_id) -> ExecutionAttempt:
    return ExecutionAttempt.objects.get(job_id=job_id)


# --- histories the services produce hold every invariant ----------------------------------------


def test_a_retried_rescued_and_completed_job_holds_every_invariant():
    job = submitted_job([{"action": "FLAKY", "failTimes": 1}], maxRetryCount=3)
    finished(job.id, "FAILURE", "flaky")
    make_due(job.id)
    started(job.id)
    rescue_expired_leases(now=timezone.now() + timedelta(minutes=5), job_ids=[job.id])
    make_due(job.id)
    finished(job.id)

    assert [a.outcome for a in ExecutionAttempt.objects.filter(job_id=job.id)] == [
        "FAILURE",
        "LOST",
        "SUCCESS",
    ]
    assert check_invariants(job_ids=[job.id]) == []


def test_a_job_dead_lettered_twice_after_an_operator_retry_holds_every_invariant():
    job = submitted_job([{"action": "FAIL", "message": "boom"}], maxRetryCount=0)
    finished(job.id, "FAILURE", "boom")
    execution_retry(job_id=job.id)
    finished(job.id, "FAILURE", "boom")

    dead_letters = OutboxEvent.objects.filter(topic="job-dead-letter", key=str(job.id))
    assert sorted(event.payload["attempts"] for event in dead_letters) == [1, 2]
    assert check_invariants(job_ids=[job.id]) == []


def test_live_jobs_within_their_leases_hold_every_invariant():
    pending, running = submitted_job(), submitted_job()
    started(running.id)

    assert check_invariants(job_ids=[pending.id, running.id]) == []


# --- each violation is found -------------------------------------------------------------------


def test_a_job_without_an_execution_is_reported():
    job = submitted_job()
    JobExecution.objects.filter(job_id=job.id).delete()

    assert found(job.id) == [("job_has_execution", "the job has no execution")]


def test_a_submitted_job_that_does_not_exist_is_reported():
    missing = uuid.uuid4()
    OutboxEvent.objects.create(topic="job-created", key=str(missing), payload={})

    assert check_invariants(job_ids=[missing]) == [
        Violation(
            "job_has_execution", str(missing), "a job-created event exists but the job does not"
        )
    ]


def test_two_success_attempts_are_reported():
    job = submitted_job()
    finished(job.id)
    attempt_like(only_attempt(job.id))
    JobExecution.objects.filter(job_id=job.id).update(attempt_count=2)

    assert found(job.id) == [("one_success", "2 SUCCESS attempts")]


def test_a_completed_job_without_a_success_attempt_is_reported():
    job = submitted_job()
    finished(job.id)
    ExecutionAttempt.objects.filter(job_id=job.id).update(outcome="FAILURE")

    assert found(job.id) == [("one_success", "COMPLETED without a SUCCESS")]


def test_a_success_on_a_job_that_is_not_completed_is_reported():
    job = submitted_job([{"action": "FAIL", "message": "boom"}], maxRetryCount=0)
    finished(job.id, "FAILURE", "boom")
    ExecutionAttempt.objects.filter(job_id=job.id).update(outcome="SUCCESS")

    assert ("one_success", "FAILED after a SUCCESS attempt") in found(job.id)


def test_a_gap_in_attempt_numbers_is_reported():
    job = submitted_job()
    finished(job.id)
    attempt_like(only_attempt(job.id), attempt=3, outcome="FAILURE")
    JobExecution.objects.filter(job_id=job.id).update(attempt_count=2)

    assert found(job.id) == [
        ("attempt_numbers", "attempts numbered [1, 3], the execution counts 2")
    ]


def test_attempts_the_execution_does_not_count_are_reported():
    job = submitted_job()
    finished(job.id)
    JobExecution.objects.filter(job_id=job.id).update(attempt_count=2)

    assert found(job.id) == [("attempt_numbers", "attempts numbered [1], the execution counts 2")]


def test_an_attempt_that_started_before_its_predecessor_is_reported():
    job = submitted_job()
    finished(job.id)
    first = only_attempt(job.id)
    ExecutionAttempt.objects.filter(pk=first.pk).update(outcome="FAILURE")
    attempt_like(first, started_at=first.started_at - timedelta(seconds=5), outcome="SUCCESS")
    JobExecution.objects.filter(job_id=job.id).update(attempt_count=2)

    assert found(job.id) == [("attempt_numbers", "attempt 2 started before its predecessor")]


def test_an_attempt_left_running_after_its_job_moved_on_is_reported():
    job = submitted_job()
    finished(job.id)
    attempt_like(only_attempt(job.id), outcome="RUNNING", finished_at=None)
    JobExecution.objects.filter(job_id=job.id).update(attempt_count=2)

    assert found(job.id) == [("live_attempt", "COMPLETED but 1 attempt(s) still RUNNING")]


def test_a_running_job_whose_attempt_does_not_hold_the_token_is_reported():
    job = submitted_job()
    started(job.id)
    JobExecution.objects.filter(job_id=job.id).update(current_event_id=uuid.uuid4())

    assert found(job.id) == [
        ("live_attempt", "RUNNING with 1 RUNNING attempt(s), 0 holding the fencing token")
    ]


@pytest.mark.parametrize("status", ["DISPATCHED", "RUNNING"])
def test_a_lease_expired_longer_ago_than_a_rescue_interval_is_reported(status):
    job = submitted_job()
    (started if status == "RUNNING" else dispatched)(job.id)
    expired = timezone.now() - timedelta(seconds=30)
    JobExecution.objects.filter(job_id=job.id).update(lease_expires_at=expired)

    [violation] = check_invariants(job_ids=[job.id])

    assert violation.invariant == "lease_rescued"
    assert violation.detail.startswith(f"{status} with a lease that expired at ")
    assert "(rescue interval 0.5 s)" in violation.detail


def test_a_lease_that_just_expired_is_not_yet_a_violation():
    job = submitted_job()
    started(job.id)
    JobExecution.objects.filter(job_id=job.id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)  # within interval + slack
    )

    assert found(job.id) == []
    assert check_invariants(job_ids=[job.id], slack_seconds=0) != []


def test_a_live_execution_without_a_lease_is_reported():
    job = submitted_job()
    started(job.id)
    JobExecution.objects.filter(job_id=job.id).update(lease_expires_at=None)

    assert found(job.id) == [("lease_rescued", "RUNNING, no lease")]


def test_a_dead_lettering_without_its_event_is_reported():
    job = submitted_job([{"action": "FAIL", "message": "boom"}], maxRetryCount=0)
    finished(job.id, "FAILURE", "boom")
    OutboxEvent.objects.filter(topic="job-dead-letter", key=str(job.id)).delete()

    assert found(job.id) == [("dead_letter_once", "dead-lettered at attempt 1 without an event")]


def test_a_missing_event_of_an_earlier_dead_lettering_is_reported_after_an_operator_retry():
    job = submitted_job([{"action": "FAIL", "message": "boom"}], maxRetryCount=0)
    finished(job.id, "FAILURE", "boom")
    OutboxEvent.objects.filter(topic="job-dead-letter", key=str(job.id)).delete()
    execution_retry(job_id=job.id)
    finished(job.id)  # the job completed since; its first dead-lettering still lacks an event

    assert execution_of(job.id).status == "COMPLETED"
    assert found(job.id) == [("dead_letter_once", "dead-lettered at attempt 1 without an event")]


def test_a_duplicate_dead_letter_event_is_reported():
    job = submitted_job([{"action": "FAIL", "message": "boom"}], maxRetryCount=0)
    finished(job.id, "FAILURE", "boom")
    original = OutboxEvent.objects.get(topic="job-dead-letter", key=str(job.id))
    OutboxEvent.objects.create(topic=original.topic, key=original.key, payload=original.payload)

    assert found(job.id) == [("dead_letter_once", "2 dead-letter events for attempt 1")]


def test_a_dead_letter_event_for_an_attempt_that_did_not_fail_is_reported():
    job = submitted_job()
    finished(job.id)
    OutboxEvent.objects.create(
        topic="job-dead-letter", key=str(job.id), payload={"jobId": str(job.id), "attempts": 1}
    )

    assert found(job.id) == [
        ("dead_letter_once", "a dead-letter event for attempt 1, which did not fail")
    ]


def test_an_execution_key_that_is_not_its_jobs_scoped_key_is_reported():
    alice = make_user("alice")
    spec = parse_job_request(
        {
            "jobType": "SIMULATION",
            "payload": {"steps": [{"action": "LOG", "message": "x"}]},
            "concurrencyKey": "customer-1",
        }
    )
    job = job_submit(spec=spec, submitted_by=alice).job
    assert found(job.id) == []

    # Another owner's key (a tenant's work counted under someone else's limit).
    JobExecution.objects.filter(job_id=job.id).update(concurrency_key="999\x1fcustomer-1")
    assert found(job.id) == [("key_scope", f"key '999\\x1fcustomer-1' of owner {alice.pk}")]
    # Another key than the job's.
    JobExecution.objects.filter(job_id=job.id).update(concurrency_key=f"{alice.pk}\x1fother")
    assert found(job.id) == [("key_scope", f"key '{alice.pk}\\x1fother', its job's 'customer-1'")]
    # Waiting with its owner's key under a global limit (set here without re-keying).
    JobExecution.objects.filter(job_id=job.id).update(concurrency_key=f"{alice.pk}\x1fcustomer-1")
    ConcurrencyLimit.objects.create(pattern="customer-*", max_running=1, is_global=True)
    assert found(job.id) == [
        ("key_scope", f"PENDING with key '{alice.pk}\\x1fcustomer-1': the limits make it shared")
    ]


def test_scope_by_creation_time_leaves_older_jobs_out():
    old = submitted_job()
    JobExecution.objects.filter(job_id=old.id).delete()
    since = timezone.now()
    new = submitted_job()

    assert [v.job_id for v in check_invariants(since=since)] == []
    assert str(old.id) in [v.job_id for v in check_invariants(job_ids=[old.id, new.id])]


# --- the command --------------------------------------------------------------------------------


@pytest.fixture
def check(monkeypatch, capsys):
    # run_from_argv closes every database connection when it ends; here that would close the
    # connection that holds the test's transaction.
    monkeypatch.setattr(connections, "close_all", lambda: None)

    def run(*args: str) -> tuple[int, str, str]:
        try:
            Command().run_from_argv(["manage.py", "check_invariants", *args])
            code = 0
        except SystemExit as exc:
            code = exc.code
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def test_command_help_runs(check):
    code, out, _ = check("--help")

    assert code == 0
    assert "--job-ids" in out and "--since" in out


def test_command_exits_0_when_every_invariant_holds(check):
    job = submitted_job()
    finished(job.id)

    assert check("--job-ids", str(job.id)) == (0, "all invariants hold\n", "")


def test_command_prints_each_violation_and_exits_1(check):
    good, bad = submitted_job(), submitted_job()
    finished(good.id)
    JobExecution.objects.filter(job_id=bad.id).delete()

    code, out, err = check("--job-ids", str(good.id), str(bad.id))

    assert code == 1
    assert out == f"job_has_execution: job {bad.id}: the job has no execution\n"
    assert err == "check_invariants: 1 violation(s)\n"


def test_command_scopes_by_creation_time(check):
    old = submitted_job()
    JobExecution.objects.filter(job_id=old.id).delete()
    since = timezone.now()
    submitted_job()

    assert check("--since", since.isoformat())[0] == 0
    assert check("--since", (since - timedelta(minutes=1)).isoformat())[0] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--job-ids", "nope"), "check_invariants: error: --job-ids: not a job id in nope\n"),
        (
            ("--since", "yesterday"),
            "check_invariants: error: --since: expected an ISO-8601 time with a zone, "
            "got 'yesterday'\n",
        ),
        (
            ("--since", "2026-01-01T00:00:00"),
            "check_invariants: error: --since: expected an ISO-8601 time with a zone, "
            "got '2026-01-01T00:00:00'\n",
        ),
    ],
)
def test_command_exits_2_on_bad_input(check, args, message):
    assert check(*args) == (2, "", message)
