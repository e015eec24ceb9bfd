"""JobWeaverBackend against the real PostgreSQL: the behaviour the django-tasks backport's own
backend tests check (enqueue, defer, priority, queues, get_result and refresh, the signals,
validation errors), written for our backend. Attempts run in this process through the real
runner (apps/executor/runner.py); tests/integration/test_tasks.py runs them on real workers."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

from jobweaver.core.errors import IdempotencyConflict
from jobweaver.engine import claim, executions
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.executor.runner import attempt_execute
from jobweaver.executor.services import Ending, attempt_finish, attempt_start
from jobweaver.jobs.models import Job
from jobweaver.jobs.python_tasks.compat import (
    InvalidTaskError,
    TaskResultDoesNotExist,
    TaskResultStatus,
    default_task_backend,
    task,
    task_backends,
    task_enqueued,
    task_finished,
    task_started,
)
from jobweaver.jobs.python_tasks.registry import registry_add, registry_remove
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import JobExecution
from jobweaver.tasks.backend import JobWeaverBackend, JobWeaverTask
from jobweaver_site.examples.tasks import add, always_fails, flaky, sleep

pytestmark = [pytest.mark.django_db]


@task
def returns_a_set() -> set:
    return {1, 2}


@task
def unregistered(a: int) -> int:
    return a


@pytest.fixture
def registered_test_tasks():
    registry_add(returns_a_set)
    yield
    registry_remove(returns_a_set)


@pytest.fixture
def signals():
    """Every task signal sent while the test runs: (name, sender, task_result)."""
    received = []
    handlers = {}
    for name, signal in (
        ("enqueued", task_enqueued),
        ("started", task_started),
        ("finished", task_finished),
    ):

        def handler(sender, task_result, _name=name, **kwargs):
            received.append((_name, sender, task_result))

        handlers[name] = handler
        signal.connect(handler, weak=False, dispatch_uid=f"test-{name}")
    yield received
    for name, signal in (
        ("enqueued", task_enqueued),
        ("started", task_started),
        ("finished", task_finished),
    ):
        signal.disconnect(dispatch_uid=f"test-{name}")


def run_next_attempt(job_id: str) -> str | None:
    """Dispatch the job now (whatever its backoff) and run its attempt here, as an executor
    would; returns the recorded outcome."""
    far_future = timezone.now() + timedelta(days=1)
    with transaction.atomic():
        [(dispatched_id, event_id, *_)] = claim.executions_claim(
            limit=1, job_ids=[uuid.UUID(job_id)], due_by=far_future
        )
    return attempt_execute(job_id=dispatched_id, event_id=event_id)


def count_rows() -> tuple[int, int]:
    return Job.objects.count(), JobExecution.objects.count()


# --- configuration ------------------------------------------------------------------------------


def test_the_default_backend_is_jobweaver():
    assert default_task_backend == task_backends["default"]
    assert isinstance(task_backends["default"], JobWeaverBackend)
    assert default_task_backend.alias == "default"
    assert (default_task_backend.supports_defer, default_task_backend.supports_priority) == (
        True,
        True,
    )
    assert default_task_backend.supports_get_result
    assert isinstance(add, JobWeaverTask)
    assert list(default_task_backend.check()) == []


# --- enqueue ------------------------------------------------------------------------------------


def test_enqueue_writes_one_task_job_and_returns_a_ready_result(django_assert_max_num_queries):
    result = add.enqueue(1, b=3)

    assert uuid.UUID(result.id).version == 4
    assert result.status == TaskResultStatus.READY
    assert not result.is_finished
    assert (result.started_at, result.last_attempted_at, result.finished_at) == (None, None, None)
    with pytest.raises(ValueError, match="Task has not finished yet"):
        result.return_value  # noqa: B018
    assert result.task == add
    assert (result.args, result.kwargs) == ([1], {"b": 3})
    assert (result.attempts, result.errors, result.backend) == (0, [], "default")
    job = Job.objects.select_related("execution").get(id=result.id)
    assert job.job_type == "TASK"
    assert job.instruction == {
        "task": "jobweaver_site.examples.tasks.add",
        "args": [1],
        "kwargs": {"b": 3},
    }
    assert (job.priority, job.task_priority, job.queue_name) == (5, 0, "default")
    assert job.execution.status == "PENDING"
    assert result.enqueued_at == job.created_at


def test_enqueue_joins_the_callers_transaction_and_announces_after_commit(
    signals, django_capture_on_commit_callbacks
):
    before = count_rows()
    with pytest.raises(RuntimeError, match="roll back"), transaction.atomic():
        add.enqueue(1, 2)
        raise RuntimeError("roll back")
    assert count_rows() == before

    with django_capture_on_commit_callbacks() as callbacks, transaction.atomic():
        result = add.enqueue(2, 3)
    assert signals == []  # not before the commit
    announce = [c for c in callbacks if "JobWeaverBackend.enqueue" in c.__qualname__]
    assert len(announce) == 1  # the others are job_submit's (dispatch, outbox relay)
    announce[0]()
    assert signals == [("enqueued", JobWeaverBackend, result)]


def test_get_result_reads_what_enqueue_wrote(django_assert_num_queries):
    result = add.enqueue(2, 3)

    with django_assert_num_queries(2):  # the job with its execution, its attempts
        again = default_task_backend.get_result(result.id)

    assert again == result
    assert add.get_result(result.id) == result


def test_get_result_of_something_else_does_not_exist():
    simulation = job_submit(
        spec=parse_job_request(
            {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
        )
    ).job
    for missing in (str(uuid.uuid4()), "123", str(simulation.id)):
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(missing)


def test_defer_sets_run_at_and_the_job_is_not_due_before_it():
    run_after = timezone.now() + timedelta(hours=1)

    result = add.using(run_after=run_after).enqueue(1, 2)

    job = Job.objects.select_related("execution").get(id=result.id)
    assert job.run_at == run_after == job.execution.next_run_at
    assert default_task_backend.get_result(result.id).task.run_after == run_after
    with transaction.atomic():
        assert claim.executions_claim(limit=10, job_ids=[job.id]) == []


@pytest.mark.parametrize(("task_priority", "job_priority"), [(-100, 0), (0, 5), (50, 7), (100, 9)])
def test_priority_is_mapped_onto_ours_and_reported_as_given(task_priority, job_priority):
    result = add.using(priority=task_priority).enqueue(1, 2)

    job = Job.objects.get(id=result.id)
    assert (job.priority, job.task_priority) == (job_priority, task_priority)
    assert default_task_backend.get_result(result.id).task.priority == task_priority


def test_a_higher_priority_task_is_dispatched_first():
    low = add.using(priority=-50).enqueue(1, 2)
    high = add.using(priority=80).enqueue(1, 2)

    with transaction.atomic():
        [(first, *_)] = claim.executions_claim(
            limit=1, job_ids=[uuid.UUID(low.id), uuid.UUID(high.id)]
        )
    assert str(first) == high.id


def test_without_queues_any_valid_queue_name_is_accepted_and_recorded():
    result = add.using(queue_name="emails").enqueue(1, 2)

    assert default_task_backend.get_result(result.id).task.queue_name == "emails"
    assert Job.objects.get(id=result.id).queue_name == "emails"
    with pytest.raises(InvalidTaskError, match="lowercase letters"):
        add.using(queue_name="Emails.EU")


def test_a_queues_list_restricts_declarations_never_a_stored_job():
    result = add.using(queue_name="reports").enqueue(2, 3)
    only_default = {
        "default": {"BACKEND": "jobweaver.tasks.JobWeaverBackend", "QUEUES": ["default"]}
    }
    with override_settings(TASKS=only_default):
        with pytest.raises(InvalidTaskError, match="Queue 'reports' is not valid for backend"):
            add.using(queue_name="reports")
        # The stored job still reads back and runs (its queue's executors serve it).
        assert default_task_backend.get_result(result.id).task.queue_name == "reports"
        assert run_next_attempt(result.id) == "SUCCESS"
        assert default_task_backend.get_result(result.id).return_value == 5


def test_per_task_options_become_the_jobs_limits():
    result = add.with_options(max_retries=0, timeout_seconds=7).enqueue(1, 2)

    job = Job.objects.get(id=result.id)
    assert (job.max_retries, job.timeout_seconds) == (0, 7)


def test_an_idempotency_key_returns_the_first_job_for_the_same_call():
    keyed = add.with_options(idempotency_key=f"invoice-{uuid.uuid4()}")

    first = keyed.enqueue(2, 3)
    again = keyed.enqueue(2, 3)

    assert again.id == first.id
    assert Job.objects.filter(id=first.id).count() == 1
    with pytest.raises(IdempotencyConflict):
        keyed.enqueue(2, 4)


# --- validation errors: nothing persisted -------------------------------------------------------


def test_invalid_tasks_are_refused():
    with pytest.raises(InvalidTaskError, match="run_after must be an aware datetime"):
        add.using(run_after=datetime.now())
    with pytest.raises(InvalidTaskError, match="priority must be a whole number"):
        add.using(priority=101)
    with pytest.raises(InvalidTaskError, match="module level"):
        task(lambda: None)
    with pytest.raises(InvalidTaskError, match="first argument of 'context'"):
        task(takes_context=True)(count_rows)
    with pytest.raises(InvalidTaskError, match="max_retries must be between 0 and"):
        add.with_options(max_retries=-1)
    with pytest.raises(InvalidTaskError, match="timeout_seconds must be between 1 and"):
        add.with_options(timeout_seconds=0)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((timezone.now(), 1), {}, r"payload.args\[0\] must be JSON .* got datetime"),
        ((1, {1, 2}), {}, r"payload.args\[1\] must be JSON"),
        ((1, float("nan")), {}, "must be a finite number"),
        ((1,), {}, r"do not fit add\(a, b\): missing a required argument: 'b'"),
        ((1, 2, 3), {}, "too many positional arguments"),
        ((1, 2), {"c": 2}, "unexpected keyword argument 'c'"),
    ],
)
def test_arguments_that_are_not_json_or_do_not_fit_are_refused(args, kwargs, message):
    before = count_rows()
    with pytest.raises(InvalidTaskError, match=message):
        add.enqueue(*args, **kwargs)
    assert count_rows() == before


def test_an_unregistered_task_is_refused():
    before = count_rows()
    with pytest.raises(InvalidTaskError, match="unregistered is not registered"):
        unregistered.enqueue(1)
    assert count_rows() == before


def test_arguments_over_the_size_cap_are_refused(settings):
    settings.JOBWEAVER_TASK_MAX_PAYLOAD_BYTES = 100
    with pytest.raises(InvalidTaskError, match="at most 100 allowed"):
        always_fails.enqueue("x" * 100)


# --- running: results, errors, attempts, signals ------------------------------------------------


def test_a_successful_run_reports_its_return_value_and_signals(signals):
    result = add.enqueue(2, 3)

    assert run_next_attempt(result.id) == "SUCCESS"

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.is_finished
    assert result.return_value == 5
    assert result.attempts == 1
    [attempt] = ExecutionAttempt.objects.filter(job_id=result.id)
    assert result.worker_ids == [attempt.worker_id]
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at == result.started_at
    assert attempt.result == 5
    assert [(name, sender) for name, sender, _ in signals] == [
        ("started", JobWeaverBackend),
        ("finished", JobWeaverBackend),
    ]
    assert signals[0][2].status == TaskResultStatus.RUNNING
    assert signals[0][2].attempts == 1
    assert signals[1][2].status == TaskResultStatus.SUCCESSFUL
    assert signals[1][2].return_value == 5


def test_an_exception_is_a_failure_attempt_with_its_type_and_traceback():
    result = always_fails.with_options(max_retries=0).enqueue("boom")

    assert run_next_attempt(result.id) == "FAILURE"

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    [error] = result.errors
    assert error.exception_class is RuntimeError
    assert error.traceback.startswith("Traceback (most recent call last):")
    assert error.traceback.endswith("RuntimeError: boom\n")
    assert "raise RuntimeError(message)" in error.traceback
    [attempt] = ExecutionAttempt.objects.filter(job_id=result.id)
    assert (attempt.outcome, attempt.error_message, attempt.exception_type) == (
        "FAILURE",
        "RuntimeError: boom",
        "builtins.RuntimeError",
    )
    assert JobExecution.objects.get(job_id=result.id).status == "FAILED"


def test_a_flaky_task_is_retried_and_sees_its_attempt_number():
    result = flaky.enqueue(1)

    assert run_next_attempt(result.id) == "FAILURE"
    result.refresh()
    assert result.status == TaskResultStatus.READY  # waiting for its retry
    assert run_next_attempt(result.id) == "SUCCESS"

    result.refresh()
    assert (result.status, result.return_value, result.attempts) == ("SUCCESSFUL", "ok", 2)
    assert [e.exception_class for e in result.errors] == [RuntimeError]
    assert "attempt 1 of 1 failing" in result.errors[0].traceback


@pytest.mark.usefixtures("registered_test_tasks")
def test_a_return_value_that_is_not_json_fails_the_attempt():
    result = returns_a_set.with_options(max_retries=0).enqueue()

    assert run_next_attempt(result.id) == "FAILURE"

    result.refresh()
    [error] = result.errors
    assert error.exception_class is TypeError
    assert "the return value must be JSON" in error.traceback


def test_a_task_reports_progress_through_its_context():
    result = sleep.enqueue(0.2)

    assert run_next_attempt(result.id) == "SUCCESS"

    [attempt] = ExecutionAttempt.objects.filter(job_id=result.id)
    assert (attempt.steps_completed, attempt.total_steps) == (1, 1)
    assert 0.2 <= attempt.result < 5


def test_a_result_offered_after_the_lease_was_rescued_is_refused_by_the_fence():
    result = add.enqueue(2, 3)
    with transaction.atomic():
        [(job_id, event_id, *_)] = claim.executions_claim(limit=1, job_ids=[uuid.UUID(result.id)])
    claimed = attempt_start(job_id=job_id, event_id=event_id, worker_id="host:1:thread")
    with transaction.atomic():  # the worker froze; its lease expired and the rescue ran
        [execution] = executions.executions_lock_expired(
            limit=1, job_ids=[job_id], expired_by=timezone.now() + timedelta(hours=1)
        )
        executions.execution_lose(execution, error="lease expired")

    accepted = attempt_finish(
        claimed=claimed, outcome=Ending.SUCCESS, steps_completed=0, log_lines=[], result=5
    )

    assert accepted is False
    attempt = ExecutionAttempt.objects.get(event_id=event_id)
    assert (attempt.outcome, attempt.result) == ("LOST", None)  # as the rescue left it
    assert default_task_backend.get_result(result.id).status == TaskResultStatus.READY
