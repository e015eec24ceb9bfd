"""Python tasks through Django's Tasks API on real workers (ARCHITECTURE §13, issue 11): real
PostgreSQL, real Kafka, real executor processes. Each test asserts only on its own jobs."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from jobweaver.core.kafka import JOB_DEAD_LETTER
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.models import Job
from jobweaver.jobs.python_tasks.compat import TaskResultStatus, task_enqueued
from jobweaver.jobs.python_tasks.exceptions import TaskTimedOut
from jobweaver.scheduler.models import JobExecution
from jobweaver_site.examples.tasks import (
    add,
    always_fails,
    async_add,
    async_sleep,
    flaky,
    picky,
    sleep,
    snoozer,
)
from tests.integration.helpers import (
    assert_invariants,
    attempts_of,
    read_event,
    wait_for_status,
    worker_pid,
)
from tests.stack import WorkerProcess, wait_for

pytestmark = [pytest.mark.integration]

TIMED_OUT = "timed out after 1 s (timeoutSeconds)"
CANARY = "jobweaver.jobs.tests.unit.never_imported"


def admin_client() -> APIClient:
    user = get_user_model().objects.create_superuser(f"ops-{uuid.uuid4().hex[:8]}", "", "pw")
    client = APIClient()
    client.force_authenticate(user)
    return client


def read_dead_letter(job_id: str, timeout: float = 60) -> dict:
    """The DeadLetterEvent of `job_id` as published on Kafka (from the topic's beginning)."""
    return read_event(JOB_DEAD_LETTER, job_id, timeout=timeout)


def test_add_enqueued_from_django_code_completes_with_its_return_value(stack, live_db):
    enqueued = []

    def on_enqueued(sender, task_result, **kwargs):
        enqueued.append(task_result.id)

    task_enqueued.connect(on_enqueued, weak=False, dispatch_uid="test-tasks-enqueued")
    try:
        result = add.enqueue(2, 3)
    finally:
        task_enqueued.disconnect(dispatch_uid="test-tasks-enqueued")
    assert enqueued == [result.id]  # autocommit: announced at once

    wait_for_status(result.id, "COMPLETED", timeout=60)

    fetched = add.get_result(result.id)
    assert (fetched.status, fetched.return_value, fetched.attempts) == (
        TaskResultStatus.SUCCESSFUL,
        5,
        1,
    )
    [attempt] = attempts_of(result.id)
    assert fetched.worker_ids == [attempt.worker_id]
    assert worker_pid(attempt) in {executor.pid for executor in stack.executors}
    result.refresh()
    assert result.return_value == 5
    detail = admin_client().get(f"/api/jobs/{result.id}").json()
    assert (detail["jobType"], detail["status"], detail["result"]) == ("TASK", "COMPLETED", 5)
    assert_invariants([result.id])


def test_flaky_succeeds_on_its_second_attempt(stack, live_db):
    result = flaky.enqueue(1)

    wait_for_status(result.id, "COMPLETED", timeout=60)

    first, second = attempts_of(result.id)
    assert (first.outcome, second.outcome) == ("FAILURE", "SUCCESS")
    assert first.exception_type == "builtins.RuntimeError"
    assert first.error_message == "RuntimeError: flaky: attempt 1 of 1 failing on purpose"
    assert "raise RuntimeError" in first.traceback
    assert (first.result, second.result) == (None, "ok")
    fetched = flaky.get_result(result.id)
    assert (fetched.return_value, fetched.attempts) == ("ok", 2)
    assert [error.exception_class for error in fetched.errors] == [RuntimeError]
    assert_invariants([result.id])


def test_always_fails_dead_letters_after_its_retries(stack, live_db):
    result = always_fails.with_options(max_retries=1).enqueue("out of luck")

    wait_for_status(result.id, "FAILED", timeout=60)

    attempts = attempts_of(result.id)
    assert [(a.outcome, a.error_message) for a in attempts] == [
        ("FAILURE", "RuntimeError: out of luck")
    ] * 2
    dead_letter = read_dead_letter(result.id)
    assert dead_letter["jobId"] == result.id
    assert dead_letter["reason"] == "retries exhausted: RuntimeError: out of luck"
    assert (dead_letter["finalRetryCount"], dead_letter["attempts"]) == (1, 2)
    fetched = always_fails.get_result(result.id)
    assert fetched.status == TaskResultStatus.FAILED
    assert [error.exception_class for error in fetched.errors] == [RuntimeError, RuntimeError]
    assert_invariants([result.id])


def test_picky_dead_letters_an_exception_outside_retry_on_and_retries_one_inside(stack, live_db):
    """retry_on=(ConnectionError,): a ValueError dead-letters at once whatever retries are left;
    a ConnectionError uses them all, with the task's own backoff."""
    refused = picky.with_options(max_retries=3).enqueue("value")
    retried = picky.with_options(max_retries=2, retry_backoff=(1, 2)).enqueue("connection")

    wait_for_status(refused.id, "FAILED", timeout=60)
    wait_for_status(retried.id, "FAILED", timeout=60)

    assert [a.outcome for a in attempts_of(refused.id)] == ["FAILURE"]
    assert read_dead_letter(refused.id)["reason"].startswith("non-retryable: ValueError")
    assert [a.exception_type for a in attempts_of(retried.id)] == ["builtins.ConnectionError"] * 3
    assert JobExecution.objects.get(job_id=retried.id).retry_count == 2
    assert_invariants([refused.id, retried.id])


def test_snoozer_completes_after_three_snoozes_without_a_retry(stack, live_db):
    result = snoozer.with_options(max_retries=0).enqueue(3)

    wait_for_status(result.id, "COMPLETED", timeout=60)

    assert [a.outcome for a in attempts_of(result.id)] == ["SNOOZED"] * 3 + ["SUCCESS"]
    assert JobExecution.objects.get(job_id=result.id).retry_count == 0
    assert snoozer.get_result(result.id).return_value == 4
    assert_invariants([result.id])


def test_an_async_task_completes_and_a_cancel_stops_a_long_one_within_a_second(stack, live_db):
    added = async_add.enqueue(2, 3)
    long = async_sleep.enqueue(60)
    wait_for_status(added.id, "COMPLETED", timeout=60)
    wait_for_status(long.id, "RUNNING", timeout=60)

    cancelled_at = timezone.now()
    response = admin_client().post(f"/api/jobs/{long.id}/cancel")
    assert response.status_code == 200, response.content
    wait_for_status(long.id, "CANCELLED", timeout=10)

    assert async_add.get_result(added.id).return_value == 5
    [attempt] = attempts_of(long.id)
    assert attempt.outcome == "CANCELLED"
    assert (attempt.finished_at - cancelled_at).total_seconds() < 1.0
    assert_invariants([added.id, long.id])


def test_a_task_over_its_timeout_fails_at_the_deadline_and_its_late_result_is_ignored(
    stack, live_db
):
    result = sleep.with_options(timeout_seconds=1, max_retries=0).enqueue(30)

    wait_for_status(result.id, "FAILED", timeout=60)

    [attempt] = attempts_of(result.id)
    assert (attempt.outcome, attempt.error_message) == ("FAILURE", TIMED_OUT)
    assert attempt.exception_type == f"{TaskTimedOut.__module__}.TaskTimedOut"
    assert 1.0 <= (attempt.finished_at - attempt.started_at).total_seconds() < 3.0
    # The function saw the stop flag and returned, after its attempt had ended: the worker
    # says it discarded that result, and nothing of it reached the job.
    executor = next(e for e in stack.executors if e.pid == worker_pid(attempt))
    wait_for(
        lambda: (
            "jobweaver_site.examples.tasks.sleep returned after its attempt ended (timed out)"
            in executor.log_text()
        ),
        timeout=30,
        message="the late return of the timed-out task",
    )
    attempt.refresh_from_db()
    assert (attempt.outcome, attempt.result) == ("FAILURE", None)
    execution = JobExecution.objects.get(job_id=result.id)
    assert (execution.status, execution.attempt_count) == ("FAILED", 1)
    assert sleep.get_result(result.id).errors[0].exception_class is TaskTimedOut
    assert_invariants([result.id])


def test_cancelling_a_running_sleep_task_stops_it_within_a_second(stack, live_db):
    client = admin_client()
    result = sleep.enqueue(60)
    # Running, and has reported progress (so the function itself is under way).
    wait_for(
        lambda: ExecutionAttempt.objects.filter(
            job_id=result.id, outcome="RUNNING", total_steps=60
        ).exists(),
        timeout=60,
        message=f"task {result.id} to run",
    )

    requested_at = timezone.now()
    response = client.post(f"/api/jobs/{result.id}/cancel")

    assert response.status_code == 200, response.content
    wait_for_status(result.id, "CANCELLED", timeout=10)
    [attempt] = attempts_of(result.id)
    stopped_after = (attempt.finished_at - requested_at).total_seconds()
    print(f"\ncancel of a running sleep task: stopped {stopped_after:.2f} s after the request")
    assert attempt.outcome == "CANCELLED"
    assert stopped_after <= 1.0
    assert sleep.get_result(result.id).status == TaskResultStatus.FAILED
    assert_invariants([result.id])


def test_run_after_defers_a_task(stack, live_db):
    run_after = timezone.now() + timedelta(seconds=2)

    result = add.using(run_after=run_after).enqueue(1, 1)

    wait_for_status(result.id, "COMPLETED", timeout=60)
    [attempt] = attempts_of(result.id)
    assert attempt.started_at >= run_after
    assert add.get_result(result.id).task.run_after == run_after


@pytest.mark.parametrize(
    "path", ["os.system", "jobweaver_site.examples.tasks.nope", f"{CANARY}.boom"]
)
def test_an_unregistered_path_over_the_api_is_a_400_and_persists_nothing(stack, live_db, path):
    before = Job.objects.count()

    response = admin_client().post(
        "/api/jobs",
        json.dumps({"jobType": "TASK", "payload": {"task": path, "args": ["id"]}}),
        content_type="application/json",
    )

    assert response.status_code == 400, response.content
    assert response.json()["errorCode"] == "API.INVALID_REQUEST"
    assert Job.objects.count() == before
    assert CANARY not in sys.modules


def test_a_periodic_schedule_exists_once_a_beat_starts_and_is_read_only(stack, live_db):
    """The examples' @periodic nightly_digest: a beat starting (a second one, beside the
    stack's) syncs it as a code schedule; the API refuses to change it."""
    from jobweaver.schedules.models import Schedule

    Schedule.objects.filter(name="nightly_digest").delete()
    second_beat = WorkerProcess("beat", f"beat-{uuid.uuid4().hex[:6]}").start()
    try:
        wait_for(
            lambda: Schedule.objects.filter(name="nightly_digest", source="code").exists(),
            timeout=60,
            message="the starting beat to sync the code's schedules",
        )
        response = admin_client().patch(
            "/api/schedules/nightly_digest", {"intervalSeconds": 60}, format="json"
        )
        assert response.status_code == 409, response.content
        assert "declared in code" in response.json()["message"]
        schedule = Schedule.objects.get(name="nightly_digest")
        assert (schedule.cron_expression, schedule.enabled) == ("0 3 * * *", True)
    finally:
        second_beat.stop()
