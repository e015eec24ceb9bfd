"""A task's JobWeaver options (ARCHITECTURE §13a) against the real PostgreSQL: declared with
`jobweaver.tasks.task`, changed per call with `with_options`, stored on the job, and applied by
the engine (which exceptions retry, with which backoff). Attempts run in this process through the
real runner; tests/integration/test_tasks.py runs them on real workers."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from jobweaver.jobs.models import Job
from jobweaver.jobs.python_tasks.compat import InvalidTaskError
from jobweaver.jobs.python_tasks.registry import registry_add, registry_remove
from jobweaver.jobs.selectors import job_detail
from jobweaver.scheduler.models import ConcurrencyLimit, JobExecution
from jobweaver.tasks import JobWeaverTask, task
from jobweaver.tasks.tests.test_backend import run_next_attempt
from jobweaver_site.examples.tasks import add, picky

pytestmark = [pytest.mark.django_db]


@task(concurrency_key="customer-{customer_id}", unique_key="sync-{customer_id}")
def sync_customer(customer_id: int, full: bool = False) -> int:
    return customer_id


@pytest.fixture
def registered():
    registry_add(sync_customer)
    yield
    registry_remove(sync_customer)


def state(result) -> tuple[str, int, int]:
    execution = JobExecution.objects.get(job_id=result.id)
    return execution.status, execution.retry_count, execution.attempt_count


def test_the_decorator_builds_jobweavers_task_with_its_options():
    assert isinstance(picky, JobWeaverTask)
    assert picky.retry_on == ("builtins.ConnectionError",)
    assert sync_customer.concurrency_key == "customer-{customer_id}"


def test_the_options_are_stored_on_the_job_and_shown_in_its_detail():
    result = picky.with_options(
        retry_backoff=(1, 30), retry_jitter=0, hard_timeout_seconds=400, max_retries=4
    ).enqueue("value")

    job = Job.objects.get(id=result.id)
    assert (job.retry_on, job.retry_backoff, job.retry_jitter, job.hard_timeout_seconds) == (
        ["builtins.ConnectionError"],
        [1, 30],
        0,
        400,
    )
    assert job.max_retries == 4
    assert job_detail(job_id=result.id)["retryPolicy"] == {
        "retryOn": ["builtins.ConnectionError"],
        "retryBackoff": [1, 30],
        "retryJitter": 0,
        "hardTimeoutSeconds": 400,
    }


def test_an_exception_outside_retry_on_dead_letters_at_once():
    result = picky.with_options(max_retries=3).enqueue("value")

    assert run_next_attempt(result.id) == "FAILURE"

    assert state(result) == ("FAILED", 0, 1)


def test_an_exception_in_retry_on_is_retried_until_the_retries_are_used():
    result = picky.with_options(max_retries=2).enqueue("connection")

    for _ in range(3):
        assert run_next_attempt(result.id) == "FAILURE"

    assert state(result) == ("FAILED", 2, 3)


@task(retry_on=(OSError,))
def refuses() -> None:
    raise ConnectionRefusedError("no")


def undeclared() -> None:
    """A module-level function (DEP 14 wants one) for declarations a test makes."""


def test_a_subclass_of_a_retry_on_class_is_retried():
    registry_add(refuses)
    try:
        result = refuses.with_options(max_retries=1).enqueue()
        run_next_attempt(result.id)
        assert state(result)[:2] == ("PENDING", 1)
    finally:
        registry_remove(refuses)


def test_the_tasks_own_backoff_decides_when_the_retry_is_due(settings):
    settings.JOBWEAVER_BACKOFF_SCALE = 1.0
    result = picky.with_options(retry_backoff=(100, 200), retry_jitter=0).enqueue("connection")

    run_next_attempt(result.id)

    execution = JobExecution.objects.get(job_id=result.id)
    delay = (execution.next_run_at - execution.updated_at).total_seconds()
    assert 199 <= delay <= 201  # min(100 * 2**1, 200)


def test_keys_are_formatted_with_the_calls_kwargs(registered):
    ConcurrencyLimit.objects.create(pattern="customer-*", max_running=1)

    first = sync_customer.enqueue(customer_id=7)
    again = sync_customer.enqueue(customer_id=7, full=True)
    other = sync_customer.enqueue(customer_id=8)

    job = Job.objects.get(id=first.id)
    assert (job.concurrency_key, job.unique_key) == ("customer-7", "sync-7")
    assert again.id == first.id  # the unique key: the job already active
    assert other.id != first.id


def test_a_key_naming_a_kwarg_the_call_does_not_give_is_refused(registered):
    with pytest.raises(InvalidTaskError, match="needs the keyword argument"):
        sync_customer.enqueue(7)
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retry_on": ()}, "retry_on"),
        ({"retry_on": ("nodots",)}, "retry_on"),
        ({"retry_backoff": (10, 5)}, "retry_backoff"),
        ({"retry_backoff": (0, 5)}, "retry_backoff"),
        ({"retry_backoff": (1,)}, "retry_backoff"),
        ({"retry_jitter": 2}, "retry_jitter"),
        ({"hard_timeout_seconds": 1, "timeout_seconds": 10}, "hard_timeout_seconds"),
        ({"concurrency_key": "c-{0}"}, "keyword arguments"),
        ({"unique_key": "u-{a.b}"}, "keyword arguments"),
        ({"unique_key": ""}, "unique_key"),
    ],
)
def test_bad_options_are_refused_where_they_are_written(options, message):
    with pytest.raises(InvalidTaskError, match=message):
        add.with_options(**options)
    with pytest.raises(InvalidTaskError, match=message):
        task(**options)(undeclared)


def test_an_unknown_option_is_a_type_error():
    with pytest.raises(TypeError, match="retry_onn"):
        add.with_options(retry_onn=(ValueError,))


def test_the_decorator_needs_jobweavers_backend(settings):
    settings.TASKS = {
        **settings.TASKS,
        "other": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"},
    }
    with pytest.raises(ImproperlyConfigured, match="JobWeaver's backend"):
        task(backend="other")(undeclared)
