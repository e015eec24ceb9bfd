"""`async def` tasks (ARCHITECTURE §13a) against the real PostgreSQL: they run on the executor's
event loop, and an attempt that ends without them (timeout, cancel) cancels the coroutine.
Attempts run in this process through the real runner; tests/integration/test_tasks.py runs them
on real workers."""

from __future__ import annotations

import asyncio
import threading

import pytest

from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.python_tasks.registry import registry_add, registry_remove
from jobweaver.scheduler.models import JobExecution
from jobweaver.tasks import task
from jobweaver.tasks.tests.test_backend import run_next_attempt
from jobweaver_site.examples.tasks import async_add

pytestmark = [pytest.mark.django_db]

cancelled = threading.Event()


@task
async def waits_forever() -> None:
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        cancelled.set()
        raise


@task(takes_context=True)
async def reads_its_context(context) -> int:
    await asyncio.sleep(0)
    return context.attempt


@pytest.fixture
def registered():
    cancelled.clear()
    registry_add(waits_forever)
    registry_add(reads_its_context)
    yield
    registry_remove(waits_forever)
    registry_remove(reads_its_context)


def test_an_async_task_returns_its_value():
    result = async_add.enqueue(2, 3)

    assert run_next_attempt(result.id) == "SUCCESS"

    assert async_add.get_result(result.id).return_value == 5


def test_an_async_task_may_take_the_context(registered):
    result = reads_its_context.enqueue()
    run_next_attempt(result.id)
    assert reads_its_context.get_result(result.id).return_value == 1


def test_a_timeout_cancels_the_coroutine(registered):
    result = waits_forever.with_options(timeout_seconds=1, max_retries=0).enqueue()

    assert run_next_attempt(result.id) == "FAILURE"

    assert cancelled.wait(2), "the coroutine saw no CancelledError"
    [attempt] = ExecutionAttempt.objects.filter(job_id=result.id)
    assert attempt.error_message == "timed out after 1 s (timeoutSeconds)"
    assert JobExecution.objects.get(job_id=result.id).status == "FAILED"
