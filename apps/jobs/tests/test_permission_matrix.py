"""The permission table of docs/operations/security.md, exercised whole (§17): each role, each
face, and their own job or another user's. A role sees and acts on what the table says, and an
action refused changes nothing.

Roles (all staff, so the admin lets them in): a submitter; a viewer (jobs.view_all_jobs); an
operator (view_all_jobs and operate_all_jobs). Faces: the REST API, the admin, the command line
run `--as` the user, the Tasks API inside a request (the user bound), the cockpit.
"""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user, token_for
from jobweaver.core.authority import acting_as
from jobweaver.dashboard.tests.helpers import execution_of, fail_attempt
from jobweaver.jobs.management.commands.jobs import Command as JobsCommand
from jobweaver.jobs.python_tasks.compat import TaskResultDoesNotExist
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver_site.examples.tasks import add

pytestmark = pytest.mark.django_db

VIEW_ALL, OPERATE_ALL = "jobweaver_jobs.view_all_jobs", "jobweaver_jobs.operate_all_jobs"
ROLES = {
    "submitter": (),
    "viewer": (VIEW_ALL,),
    "operator": (VIEW_ALL, OPERATE_ALL),
}
WHOSE = ("own", "other")
TASK = {"jobType": "TASK", "payload": {"task": add.module_path, "args": [1, 2]}}


def failed_task_job(user):
    job = job_submit(spec=parse_job_request({**TASK, "maxRetryCount": 0}), submitted_by=user).job
    fail_attempt(job, "kaput", [])
    return job


@pytest.fixture(params=list(ROLES))
def case(request):
    role = request.param
    user = make_user(role, *SUBMITTER, *ROLES[role], is_staff=True)
    stranger = make_user("zed", *SUBMITTER, is_staff=True)
    return role, user, {"own": failed_task_job(user), "other": failed_task_job(stranger)}


def may_see(role: str, whose: str) -> bool:
    return whose == "own" or role in ("viewer", "operator")


def may_act(role: str, whose: str) -> bool:
    return whose == "own" or role == "operator"


@pytest.mark.parametrize("whose", WHOSE)
def test_rest_api(case, whose):
    role, user, jobs = case
    job = jobs[whose]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")

    seen = client.get(f"/api/jobs/{job.id}").status_code
    listed = str(job.id) in {j["jobId"] for j in client.get("/api/jobs?size=100").json()["jobs"]}
    acted = client.post(f"/api/jobs/{job.id}/retry").status_code

    assert (seen == 200, listed) == (may_see(role, whose),) * 2
    if may_act(role, whose):
        assert acted == 200
        assert execution_of(job.id).status == "PENDING"
    else:
        assert acted == (403 if may_see(role, whose) else 404)  # unseen: not even "forbidden"
        assert execution_of(job.id).status == "FAILED"


@pytest.mark.parametrize("whose", WHOSE)
def test_admin(case, whose):
    role, user, jobs = case
    job = jobs[whose]
    client = Client()
    client.force_login(user)

    # The list first: after the change page's "does not exist" redirect, the next page shows
    # that message, which repeats the id the user asked for.
    listed = str(job.id)[:8] in client.get("/admin/jobweaver_jobs/job/").content.decode()
    page = client.get(f"/admin/jobweaver_jobs/job/{job.id}/change/")
    client.post("/admin/jobweaver_jobs/job/bulk/retry/", {"ids": [str(job.id)]})

    assert (page.status_code == 200, listed) == (may_see(role, whose),) * 2
    if not may_see(role, whose):
        assert page.status_code == 302  # the admin's "does not exist" redirect
    expected = "PENDING" if may_act(role, whose) else "FAILED"
    assert execution_of(job.id).status == expected


@pytest.mark.parametrize("whose", WHOSE)
def test_command_line_as_the_user(case, whose, run_command):
    role, user, jobs = case
    job = jobs[whose]

    shown = run_command(JobsCommand, "jobs", "show", str(job.id), "--as", user.username)
    retried = run_command(JobsCommand, "jobs", "retry", str(job.id), "--as", user.username)

    assert shown.code == (0 if may_see(role, whose) else 2)
    if may_act(role, whose):
        assert retried.code == 0 and execution_of(job.id).status == "PENDING"
    else:
        assert retried.code == (1 if may_see(role, whose) else 2)
        assert execution_of(job.id).status == "FAILED"


@pytest.mark.parametrize("whose", WHOSE)
def test_tasks_api_with_the_user_bound(case, whose):
    role, user, jobs = case
    job = jobs[whose]
    with acting_as(user):
        if may_see(role, whose):
            assert add.get_result(str(job.id)).id == str(job.id)
        else:
            with pytest.raises(TaskResultDoesNotExist):
                add.get_result(str(job.id))
    assert add.get_result(str(job.id)).id == str(job.id)  # code: the server's authority


def test_cockpit(case):
    role, user, _ = case
    client = Client()
    client.force_login(user)
    for page in ("/admin/ops/", "/admin/ops/dead-letters/"):
        assert client.get(page).status_code == (403 if role == "submitter" else 200), page
