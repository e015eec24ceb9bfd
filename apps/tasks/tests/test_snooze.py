"""Snooze (ARCHITECTURE §13a) against the real PostgreSQL: a task that raises Snooze (or calls
`context.snooze`) ends its attempt SNOOZED and runs again later without using a retry, up to
JOBWEAVER_MAX_SNOOZES; the engine's transition "snooze". Attempts run in this process through
the real runner; tests/integration/test_tasks.py runs them on real workers."""

from __future__ import annotations

import pytest

from jobweaver.engine import executions
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.executor.services import Ending, attempt_finish, attempt_start
from jobweaver.jobs.python_tasks.compat import TaskResultStatus
from jobweaver.jobs.python_tasks.exceptions import Snooze
from jobweaver.jobs.python_tasks.registry import registry_add, registry_remove
from jobweaver.scheduler.invariants import check_invariants
from jobweaver.scheduler.models import JobExecution
from jobweaver.scheduler.tests.factories import dispatched
from jobweaver.tasks import task
from jobweaver.tasks.tests.test_backend import run_next_attempt
from jobweaver_site.examples.tasks import snoozer

pytestmark = [pytest.mark.django_db]


def outcomes(job_id) -> list[str]:
    rows = ExecutionAttempt.objects.filter(job_id=job_id).order_by("attempt")
    return list(rows.values_list("outcome", flat=True))


def test_a_snoozing_task_completes_without_using_a_retry():
    result = snoozer.with_options(max_retries=0).enqueue(3)

    for _ in range(4):
        run_next_attempt(result.id)

    execution = JobExecution.objects.get(job_id=result.id)
    assert (execution.status, execution.retry_count, execution.snooze_count) == ("COMPLETED", 0, 3)
    assert outcomes(result.id) == ["SNOOZED"] * 3 + ["SUCCESS"]
    fetched = snoozer.get_result(result.id)
    assert (fetched.return_value, fetched.errors) == (4, [])
    assert not check_invariants(job_ids=[result.id])


def test_a_snoozed_job_is_due_after_its_snooze_and_reads_as_ready():
    result = snoozer.enqueue(1)

    assert run_next_attempt(result.id) == "SNOOZED"

    execution = JobExecution.objects.get(job_id=result.id)
    assert execution.status == "PENDING"
    assert execution.current_event_id is None and execution.lease_expires_at is None
    [attempt] = ExecutionAttempt.objects.filter(job_id=result.id)
    wait = (execution.next_run_at - attempt.finished_at).total_seconds()
    assert 0.15 <= wait <= 0.5
    assert snoozer.get_result(result.id).status == TaskResultStatus.READY


def test_past_the_most_snoozes_the_job_dead_letters(settings):
    settings.JOBWEAVER_MAX_SNOOZES = 2
    result = snoozer.with_options(max_retries=5).enqueue(10)

    for _ in range(3):
        run_next_attempt(result.id)

    execution = JobExecution.objects.get(job_id=result.id)
    assert (execution.status, execution.retry_count) == ("FAILED", 0)
    assert outcomes(result.id) == ["SNOOZED", "SNOOZED", "FAILURE"]
    assert "JOBWEAVER_MAX_SNOOZES" in execution.last_error
    assert not check_invariants(job_ids=[result.id])


@task
def later() -> None:
    raise Snooze(30)


def test_raising_snooze_works_like_the_context():
    registry_add(later)
    try:
        result = later.enqueue()
        assert run_next_attempt(result.id) == "SNOOZED"
        assert JobExecution.objects.get(job_id=result.id).snooze_count == 1
    finally:
        registry_remove(later)


@pytest.mark.parametrize("seconds", [-1, 31 * 86_400, "5", True])
def test_a_snooze_out_of_range_is_refused(seconds):
    with pytest.raises(ValueError, match="Snooze needs"):
        Snooze(seconds)


def test_a_job_cancelled_while_it_ran_ends_cancelled_when_it_snoozes():
    result = snoozer.enqueue(1)
    execution = JobExecution.objects.get(job_id=result.id)
    event_id = dispatched(execution.job_id)
    claimed = attempt_start(job_id=execution.job_id, event_id=event_id, worker_id="w:1:t")
    executions.execution_cancel(job_id=execution.job_id)

    assert attempt_finish(
        claimed=claimed, outcome=Ending.SNOOZED, steps_completed=0, log_lines=[], snooze_seconds=1
    )

    assert JobExecution.objects.get(job_id=result.id).status == "CANCELLED"
    assert outcomes(result.id) == ["CANCELLED"]


def test_a_stale_snooze_changes_nothing():
    result = snoozer.enqueue(1)
    job_id = JobExecution.objects.get(job_id=result.id).job_id
    event_id = dispatched(job_id)
    claimed = attempt_start(job_id=job_id, event_id=event_id, worker_id="w:1:t")
    attempt_finish(claimed=claimed, outcome=Ending.SUCCESS, steps_completed=0, log_lines=[])

    assert not attempt_finish(
        claimed=claimed, outcome=Ending.SNOOZED, steps_completed=0, log_lines=[], snooze_seconds=1
    )
    assert JobExecution.objects.get(job_id=result.id).status == "COMPLETED"
