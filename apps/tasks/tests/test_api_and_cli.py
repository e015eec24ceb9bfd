"""TASK jobs through the API and `submit_job --task` (ARCHITECTURE §13), against the real
PostgreSQL; attempts run in this process through the real runner."""

from __future__ import annotations

import json
import sys
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connections
from rest_framework.test import APIClient

from jobweaver.jobs.models import Job
from jobweaver.jobs.tests.api_helpers import api_client
from jobweaver.scheduler.models import JobExecution
from jobweaver.tasks.tests.test_backend import run_next_attempt

pytestmark = [pytest.mark.django_db]

CANARY = "jobweaver.jobs.tests.unit.never_imported"


@pytest.fixture
def client() -> APIClient:
    user = get_user_model().objects.create_superuser(f"admin-{uuid.uuid4().hex[:8]}", "", "pw")
    api = APIClient()
    api.force_authenticate(user)
    return api


def post_job(client: APIClient, body: dict):
    return client.post("/api/jobs", json.dumps(body), content_type="application/json")


def counts() -> tuple[int, int]:
    return Job.objects.count(), JobExecution.objects.count()


def test_a_task_job_over_the_api_runs_and_its_detail_shows_the_result(client):
    response = post_job(
        client,
        {
            "jobType": "TASK",
            "payload": {"task": "jobweaver_site.examples.tasks.add", "args": [2, 3]},
        },
    )
    assert response.status_code == 202, response.content
    job_id = response.json()["jobId"]

    assert run_next_attempt(job_id) == "SUCCESS"

    detail = client.get(f"/api/jobs/{job_id}").json()
    assert (detail["jobType"], detail["status"], detail["result"]) == ("TASK", "COMPLETED", 5)
    assert detail["payload"] == {
        "task": "jobweaver_site.examples.tasks.add",
        "args": [2, 3],
        "kwargs": {},
    }
    assert detail["attempts"][0]["result"] == 5
    assert detail["attempts"][0]["outcome"] == "SUCCESS"


def test_the_detail_of_a_failed_task_shows_each_exception(client):
    response = post_job(
        client,
        {
            "jobType": "TASK",
            "payload": {"task": "jobweaver_site.examples.tasks.always_fails", "args": ["no luck"]},
            "maxRetryCount": 0,
        },
    )
    job_id = response.json()["jobId"]

    assert run_next_attempt(job_id) == "FAILURE"

    detail = client.get(f"/api/jobs/{job_id}").json()
    assert (detail["status"], detail["result"]) == ("FAILED", None)
    assert detail["lastError"] == "RuntimeError: no luck"
    [attempt] = detail["attempts"]
    assert attempt["errorMessage"] == "RuntimeError: no luck"
    assert attempt["exceptionType"] == "builtins.RuntimeError"
    assert attempt["traceback"].endswith("RuntimeError: no luck\n")  # an operator's view


def test_a_submitter_sees_the_exception_but_not_the_servers_traceback():
    submitter = api_client("submitter")  # add, change and view their own jobs
    response = post_job(
        submitter,
        {
            "jobType": "TASK",
            "payload": {"task": "jobweaver_site.examples.tasks.always_fails", "args": ["no"]},
            "maxRetryCount": 0,
        },
    )
    job_id = response.json()["jobId"]
    run_next_attempt(job_id)

    for detail in (
        submitter.get(f"/api/jobs/{job_id}").json(),
        submitter.get("/api/jobs").json()["jobs"][0],
    ):
        [attempt] = detail["attempts"]
        assert attempt["exceptionType"] == "builtins.RuntimeError"
        assert attempt["errorMessage"] == "RuntimeError: no"
        assert attempt["traceback"] is None


@pytest.mark.parametrize(
    "path", ["os.system", "jobweaver_site.examples.tasks.nope", f"{CANARY}.boom"]
)
def test_an_unregistered_path_is_a_400_that_persists_and_imports_nothing(client, path):
    before = counts()

    response = post_job(client, {"jobType": "TASK", "payload": {"task": path, "args": ["id"]}})

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["errorCode"] == "API.INVALID_REQUEST"
    assert body["message"] == f"payload.task {path!r} is not a registered task"
    assert counts() == before
    assert CANARY not in sys.modules


def test_a_batch_may_hold_task_jobs(client):
    task_job = {
        "jobType": "TASK",
        "payload": {"task": "jobweaver_site.examples.tasks.add", "args": [1, 1]},
    }
    response = client.post(
        "/api/jobs/batch", json.dumps({"jobs": [task_job]}), content_type="application/json"
    )
    assert response.status_code == 202, response.content
    [created] = response.json()["jobs"]
    job = Job.objects.get(id=created["jobId"])
    assert (job.job_type, job.instruction["task"]) == ("TASK", "jobweaver_site.examples.tasks.add")


@pytest.fixture
def keep_connection(monkeypatch):
    # A command closes every connection when it ends; here that is the test's transaction.
    monkeypatch.setattr(connections, "close_all", lambda: None)


@pytest.mark.usefixtures("keep_connection")
def test_submit_job_task_submits_a_task_job(capsys):
    call_command(
        "submit_job",
        "--task",
        "jobweaver_site.examples.tasks.add",
        "--args",
        "[2]",
        "--kwargs",
        '{"b": 3}',
        "--json",
    )

    detail = json.loads(capsys.readouterr().out)
    assert (detail["jobType"], detail["status"]) == ("TASK", "PENDING")
    assert detail["payload"] == {
        "task": "jobweaver_site.examples.tasks.add",
        "args": [2],
        "kwargs": {"b": 3},
    }


@pytest.mark.usefixtures("keep_connection")
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--task", "os.system", "--args", '["id"]'], "'os.system' is not a registered task"),
        (
            ["--task", "jobweaver_site.examples.tasks.add", "--args", "[2"],
            "--args is not valid JSON",
        ),
        (
            ["--task", "jobweaver_site.examples.tasks.add", "--args", "[2]"],
            "missing a required argument",
        ),
        (["--args", "[2, 3]", "--sleep", "1"], "--args and --kwargs go with --task"),
        (
            ["--task", "jobweaver_site.examples.tasks.add", "--sleep", "1"],
            "either --task or step flags",
        ),
    ],
)
def test_submit_job_task_refuses_bad_input_with_exit_2(argv, message, capsys):
    before = counts()
    from jobweaver.jobs.management.commands.submit_job import Command

    with pytest.raises(SystemExit) as exited:
        Command().run_from_argv(["manage.py", "submit_job", *argv])

    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert counts() == before
    assert CANARY not in sys.modules
