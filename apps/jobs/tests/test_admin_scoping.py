"""Who sees and does what in the admin and the cockpit (ARCHITECTURE §17): a staff submitter
sees and acts on their own jobs only, in every page (jobs, executions, attempts, workflows,
"all matching"); the outbox, the dashboard and the dead-letter desk are operators' pages
(jobs.view_all_jobs); acting on another user's job needs jobs.operate_all_jobs too."""

from __future__ import annotations

import pytest
from django.urls import reverse

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.scheduler.models import JobExecution
from jobweaver.scheduler.tests.factories import finished, submitted_job
from jobweaver.workflows.services import workflow_submit
from jobweaver.workflows.validation import parse_workflow_request

pytestmark = pytest.mark.django_db

VIEW_ALL, OPERATE_ALL = "jobweaver_jobs.view_all_jobs", "jobweaver_jobs.operate_all_jobs"
# What a staff submitter may be given to look at the history pages: still their own rows only.
HISTORY = ("jobweaver_scheduler.view_jobexecution", "jobweaver_executor.view_executionattempt")
LOG = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}


def owned(user, **fields):
    job = submitted_job(**fields)
    type(job).objects.filter(id=job.id).update(submitted_by=user)
    JobExecution.objects.filter(job_id=job.id).update(submitted_by=user)
    return job


@pytest.fixture
def tenants(client):
    alice = make_user("alice", *SUBMITTER, *HISTORY, is_staff=True)
    bob = make_user("bob", *SUBMITTER, *HISTORY, is_staff=True)
    mine, theirs = owned(alice, maxRetryCount=0), owned(bob, maxRetryCount=0)
    finished(mine.id, outcome="FAILURE", error="mine")
    finished(theirs.id, outcome="FAILURE", error="theirs")
    client.force_login(alice)
    return client, mine, theirs


def test_a_staff_submitter_sees_only_their_own_jobs_in_every_admin_list(tenants):
    client, mine, theirs = tenants
    for page in (
        "/admin/jobweaver_jobs/job/",
        "/admin/jobweaver_scheduler/jobexecution/",
        "/admin/jobweaver_executor/executionattempt/",
    ):
        html = client.get(page).content.decode()
        assert str(mine.id)[:8] in html, page
        assert str(theirs.id)[:8] not in html, page


def test_another_users_job_page_and_attempt_page_are_not_found(tenants):
    client, _, theirs = tenants
    attempt = ExecutionAttempt.objects.get(job_id=theirs.id)
    for page in (
        f"/admin/jobweaver_jobs/job/{theirs.id}/change/",
        f"/admin/jobweaver_executor/executionattempt/{attempt.event_id}/change/",
    ):
        response = client.get(page, follow=True)
        assert "theirs" not in response.content.decode(), page
        assert response.redirect_chain, page  # the admin's "does not exist" redirect


def test_all_matching_acts_on_ones_own_jobs_only(tenants):
    client, mine, theirs = tenants
    bulk = reverse("admin:jobweaver_jobs_job_bulk", args=["retry"])

    client.post(bulk, {"confirm": "yes"})

    assert JobExecution.objects.get(job_id=mine.id).status == "PENDING"
    assert JobExecution.objects.get(job_id=theirs.id).status == "FAILED"
    # Named ids from the job page's buttons: another user's id changes nothing either.
    client.post(bulk, {"ids": [str(theirs.id)]})
    assert JobExecution.objects.get(job_id=theirs.id).status == "FAILED"


def test_seeing_all_is_not_acting_on_all(client, tenants):
    _, mine, theirs = tenants
    auditor = make_user("auditor", *SUBMITTER, VIEW_ALL, is_staff=True)
    client.force_login(auditor)
    assert str(theirs.id)[:8] in client.get("/admin/jobweaver_jobs/job/").content.decode()

    client.post(reverse("admin:jobweaver_jobs_job_bulk", args=["retry"]), {"confirm": "yes"})

    assert JobExecution.objects.get(job_id=theirs.id).status == "FAILED"
    operator = make_user("operator", *SUBMITTER, VIEW_ALL, OPERATE_ALL, is_staff=True)
    client.force_login(operator)
    client.post(reverse("admin:jobweaver_jobs_job_bulk", args=["retry"]), {"confirm": "yes"})
    assert JobExecution.objects.get(job_id=theirs.id).status == "PENDING"
    assert JobExecution.objects.get(job_id=mine.id).status == "PENDING"


def test_the_outbox_dashboard_and_desk_are_operators_pages(tenants):
    client, _, _ = tenants
    for page in (
        reverse("jobweaver-dashboard"),
        reverse("jobweaver-dashboard-live"),
        reverse("jobweaver-dead-letters"),
    ):
        assert client.get(page).status_code == 403, page
    assert client.get("/admin/jobweaver_outbox/outboxevent/").status_code == 403
    assert "Operations dashboard" not in client.get("/admin/").content.decode()

    operator = make_user("op2", *SUBMITTER, VIEW_ALL, is_staff=True)
    client.force_login(operator)
    assert client.get(reverse("jobweaver-dashboard")).status_code == 200
    assert client.get(reverse("jobweaver-dead-letters")).status_code == 200


def test_another_users_workflow_is_not_listed(client):
    alice = make_user("wf-alice", *SUBMITTER, is_staff=True)
    bob = make_user("wf-bob", *SUBMITTER, is_staff=True)
    spec = parse_workflow_request({"name": "bobs", "jobs": [{"ref": "a", "job": LOG}]})
    theirs = workflow_submit(spec=spec, submitted_by=bob)
    client.force_login(alice)

    assert "bobs" not in client.get("/admin/jobweaver_workflows/workflow/").content.decode()
    response = client.get(f"/admin/jobweaver_workflows/workflow/{theirs.id}/change/", follow=True)
    assert response.redirect_chain
