"""Operators' workflows (ARCHITECTURE §16): the admin's list and page with its graph, cancel and
retry as actions, `manage.py workflows` with its exit codes, the dashboard's counts."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from jobweaver.accounts.tests.helpers import make_user
from jobweaver.executor.services import attempt_finish
from jobweaver.scheduler.tests.factories import started
from jobweaver.workflows.models import Workflow
from jobweaver.workflows.services import workflow_submit
from jobweaver.workflows.validation import parse_workflow_request

pytestmark = pytest.mark.django_db

LOG = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}


def submitted(name: str = "ops") -> Workflow:
    return workflow_submit(
        spec=parse_workflow_request(
            {
                "name": name,
                "jobs": [
                    {"ref": "first", "job": {**LOG, "maxRetryCount": 0}},
                    {"ref": "second", "dependsOn": ["first"], "job": LOG},
                ],
            }
        )
    )


def failed_first(workflow: Workflow) -> None:
    claimed = started(workflow.jobs_by_ref["first"].id)
    attempt_finish(
        claimed=claimed,
        outcome="FAILURE",
        error="x",
        retryable=False,
        steps_completed=0,
        log_lines=[],
    )


def operator_client(client, *permissions):
    user = make_user(None, *permissions, is_staff=True)
    client.force_login(user)
    return client


def test_the_admin_lists_workflows_and_draws_one_with_links_to_its_jobs(client):
    workflow = submitted("drawn")
    operator_client(client, "jobweaver_jobs.view_job", "jobweaver_jobs.view_all_jobs")

    listing = client.get("/admin/jobweaver_workflows/workflow/")
    page = client.get(f"/admin/jobweaver_workflows/workflow/{workflow.id}/change/")

    assert listing.status_code == 200 and "drawn" in listing.content.decode()
    html = page.content.decode()
    assert page.status_code == 200
    assert html.count('class="jw-node"') == 2
    for job in workflow.jobs_by_ref.values():
        assert f"/admin/jobweaver_jobs/job/{job.id}/change/" in html


def test_the_admin_needs_the_job_permissions(client):
    workflow = submitted()
    operator_client(client)
    assert client.get(f"/admin/jobweaver_workflows/workflow/{workflow.id}/change/").status_code in (
        302,
        403,
    )


def test_the_admin_actions_cancel_and_retry_failed_jobs(client):
    cancel_me, retry_me = submitted("cancel-me"), submitted("retry-me")
    failed_first(retry_me)
    operator_client(
        client,
        "jobweaver_jobs.view_job",
        "jobweaver_jobs.change_job",
        "jobweaver_jobs.view_all_jobs",
        "jobweaver_jobs.operate_all_jobs",
    )

    for action, workflow in (("cancel_workflows", cancel_me), ("retry_failed_jobs", retry_me)):
        response = client.post(
            "/admin/jobweaver_workflows/workflow/",
            {"action": action, "_selected_action": [str(workflow.id)]},
        )
        assert response.status_code == 302

    assert Workflow.objects.get(id=cancel_me.id).status == "CANCELLED"
    retried = Workflow.objects.get(id=retry_me.id)
    assert (retried.status, retried.unfinished, retried.failed) == ("RUNNING", 2, 0)


def test_the_command_lists_shows_cancels_and_retries(capsys):
    workflow = submitted("cli")
    call_command("workflows", "list", "--json")
    assert str(workflow.id) in {row["workflowId"] for row in json.loads(capsys.readouterr().out)}
    call_command("workflows", "show", str(workflow.id))
    shown = capsys.readouterr().out
    assert "second" in shown and "after first" in shown

    call_command("workflows", "cancel", str(workflow.id), "--json")
    assert json.loads(capsys.readouterr().out)["status"] == "CANCELLED"

    with pytest.raises(CommandError) as finished:
        call_command("workflows", "cancel", str(workflow.id))
    assert finished.value.returncode == 1
    with pytest.raises(CommandError) as unknown:
        call_command("workflows", "show", "00000000-0000-0000-0000-000000000000")
    assert unknown.value.returncode == 2

    failing = submitted("cli-retry")
    failed_first(failing)
    call_command("workflows", "retry", str(failing.id), "--json")
    assert json.loads(capsys.readouterr().out)["retried"] == [str(failing.jobs_by_ref["first"].id)]


def test_the_dashboard_counts_workflows_by_status(client):
    submitted()
    operator_client(client, "jobweaver_jobs.view_job", "jobweaver_jobs.view_all_jobs")

    live = client.get(reverse("jobweaver-dashboard-live")).json()

    assert live["figures"]["workflows"]["RUNNING"] == 1
    assert 'id="jw-workflows"' in live["html"]
