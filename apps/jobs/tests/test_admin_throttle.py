"""The admin's actions that submit, retry or cancel take from the same per-user buckets as the
API (§17, issue 35 item 8): one token per action, however many jobs it touches; without one the
action does nothing and says so. Operators are exempt."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user
from jobweaver.jobs.models import Job
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import ExecutionStatus, JobExecution
from jobweaver.workflows.models import Workflow
from jobweaver.workflows.services import workflow_submit
from jobweaver.workflows.validation import parse_workflow_request

pytestmark = pytest.mark.django_db

JOBS = reverse("admin:jobweaver_jobs_job_changelist")
SUBMIT = reverse("admin:jobweaver_jobs_job_submit")
WORKFLOWS = "/admin/jobweaver_workflows/workflow/"
LOG = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
FORM = {"job_type": "SIMULATION", "steps": json.dumps(LOG["payload"]["steps"]), "priority": 5}


@pytest.fixture
def one_token(settings):
    settings.JOBWEAVER_SUBMIT_THROTTLE_BURST = 1
    settings.JOBWEAVER_SUBMIT_THROTTLE_RATE = 1
    settings.JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS = 3600


def logged_in(client, *extra):
    user = make_user("staff-submitter", *SUBMITTER, *extra, is_staff=True)
    client.force_login(user)
    return user


def own_job(user) -> Job:
    return job_submit(spec=parse_job_request(LOG), submitted_by=user).job


def action(client, url: str, name: str, ids):
    response = client.post(
        url, {"action": name, "_selected_action": [str(i) for i in ids], "index": 0}, follow=True
    )
    return [str(message) for message in response.context["messages"]]


def status_of(job: Job) -> str:
    return JobExecution.objects.get(job_id=job.id).status


def test_the_submit_form_is_throttled(client, one_token):
    user = logged_in(client)

    assert client.post(SUBMIT, FORM).status_code == 302
    refused = client.post(SUBMIT, FORM)

    assert refused.status_code == 200 and "Too many requests" in refused.content.decode()
    assert Job.objects.filter(submitted_by=user).count() == 1


def test_bulk_cancel_and_retry_are_throttled_one_token_per_action(client, one_token):
    user = logged_in(client)
    first, second, third = own_job(user), own_job(user), own_job(user)

    action(client, JOBS, "cancel_jobs", [first.id, second.id])  # one action, one token
    shown = action(client, JOBS, "cancel_jobs", [third.id])

    assert (status_of(first), status_of(second)) == (ExecutionStatus.CANCELLED,) * 2
    assert status_of(third) == ExecutionStatus.PENDING
    assert any(message.startswith("Too many requests") for message in shown), shown
    shown = action(client, JOBS, "retry_jobs", [first.id])  # the submit bucket: still full
    assert status_of(first) == ExecutionStatus.PENDING
    shown = action(client, JOBS, "retry_jobs", [second.id])
    assert status_of(second) == ExecutionStatus.CANCELLED
    assert any(message.startswith("Too many requests") for message in shown), shown


def test_workflow_cancel_in_the_admin_is_throttled(client, one_token):
    user = logged_in(client, "jobweaver_workflows.view_workflow")
    spec = parse_workflow_request({"name": "w", "jobs": [{"ref": "a", "job": LOG}]})
    first, second = (workflow_submit(spec=spec, submitted_by=user) for _ in range(2))

    action(client, WORKFLOWS, "cancel_workflows", [first.id])
    shown = action(client, WORKFLOWS, "cancel_workflows", [second.id])

    assert Workflow.objects.get(id=second.id).status != "CANCELLED"
    assert any(message.startswith("Too many requests") for message in shown), shown


def test_operators_are_not_throttled_in_the_admin(client, one_token):
    user = logged_in(client, "jobweaver_jobs.view_all_jobs", "jobweaver_jobs.operate_all_jobs")
    jobs = [own_job(user) for _ in range(3)]

    for job in jobs:
        action(client, JOBS, "cancel_jobs", [job.id])
    assert [status_of(job) for job in jobs] == [ExecutionStatus.CANCELLED] * 3
    assert [client.post(SUBMIT, FORM).status_code for _ in range(3)] == [302] * 3
