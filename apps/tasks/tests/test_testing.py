"""`jobweaver.testing` as a host project uses it: the `jobweaver_eager` fixture runs enqueued
jobs inline at commit through the real runner (retries, snoozes and all), and `run_jobs` runs
what waits. The fixture comes from this directory's conftest, as a project's
`pytest_plugins = ["jobweaver.testing"]` gives it."""

from __future__ import annotations

import pytest
from django.db import transaction

from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.models import Job
from jobweaver.jobs.python_tasks.registry import registry_add, registry_remove
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import JobExecution
from jobweaver.tasks import task
from jobweaver.testing import run_jobs
from jobweaver_site.examples.tasks import add, flaky, picky, snoozer


@task
def count_jobs() -> int:
    return Job.objects.count()


def status(result) -> str:
    return JobExecution.objects.get(job_id=result.id).status


@pytest.mark.django_db
def test_an_enqueued_task_runs_at_once_in_a_test(jobweaver_eager):
    result = add.enqueue(2, 3)

    assert status(result) == "COMPLETED"
    assert add.get_result(result.id).return_value == 5


@pytest.mark.django_db
def test_retries_and_snoozes_play_out_at_once(jobweaver_eager):
    retried = flaky.with_options(max_retries=2).enqueue(2)
    snoozed = snoozer.enqueue(2)
    refused = picky.with_options(max_retries=3).enqueue("value")

    assert (status(retried), flaky.get_result(retried.id).return_value) == ("COMPLETED", "ok")
    assert ExecutionAttempt.objects.filter(job_id=retried.id).count() == 3
    assert snoozer.get_result(snoozed.id).return_value == 3
    assert status(refused) == "FAILED"
    assert ExecutionAttempt.objects.filter(job_id=refused.id).count() == 1


@pytest.mark.django_db
def test_a_task_sees_the_tests_own_rows(jobweaver_eager):
    registry_add(count_jobs)
    try:
        result = count_jobs.enqueue()
        assert count_jobs.get_result(result.id).return_value == 1  # its own job
    finally:
        registry_remove(count_jobs)


@pytest.mark.django_db
def test_inside_your_transaction_it_runs_when_that_commits(
    jobweaver_eager, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        result = add.enqueue(1, 1)
        assert status(result) == "PENDING"
    assert status(result) == "COMPLETED"


@pytest.mark.django_db(transaction=True)
def test_in_a_transactional_test_it_runs_when_the_block_commits(jobweaver_eager):
    with transaction.atomic():
        result = add.enqueue(1, 2)
        assert status(result) == "PENDING"
    assert add.get_result(result.id).return_value == 3


@pytest.mark.django_db
def test_run_jobs_runs_what_waits_however_it_was_submitted():
    body = {"jobType": "TASK", "payload": {"task": add.module_path, "args": [4, 5]}}
    job = job_submit(spec=parse_job_request({**body, "queueName": "reports"})).job

    assert run_jobs([job.id]) == 1

    assert JobExecution.objects.get(job=job).status == "COMPLETED"
