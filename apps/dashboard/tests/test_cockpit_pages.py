"""The dashboard, its live endpoint, the dead-letter desk and the Submit a job page."""

from __future__ import annotations

import json
import uuid

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from jobweaver.dashboard.tests.helpers import (
    dead_letter,
    execution_of,
    fail_attempt,
    failed_once,
    submitted_job,
)
from jobweaver.jobs.models import Job
from jobweaver.jobs.services import job_retry
from jobweaver.scheduler.models import Queue
from jobweaver.scheduler.services import queue_pause
from jobweaver.scheduler.tests.factories import live_executor, started

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("jobweaver-dashboard")
LIVE = reverse("jobweaver-dashboard-live")
DESK = reverse("jobweaver-dead-letters")
SUBMIT = reverse("admin:jobweaver_jobs_job_submit")


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_the_admin_index_links_the_dashboard(admin_client):
    content = admin_client.get(reverse("admin:index")).content.decode()

    assert f'href="{DASHBOARD}"' in content
    assert f'href="{DESK}"' in content


def test_dashboard_shows_counts_chart_executors_kafka_and_failures(admin_client):
    submitted_job()
    failed_once("flaky thing")
    dead_letter("final boom")
    running = submitted_job()
    started(running.id)
    live_executor("dash-host:1", slots=4)

    response = admin_client.get(DASHBOARD)

    assert response.status_code == 200
    content = response.content.decode()
    counts = {tile["key"]: tile["count"] for tile in response.context["tiles"]}
    assert counts["retrying"] >= 1 and counts["dead_letters"] >= 1 and counts["running"] >= 1
    for expected in (
        "<svg",  # the throughput chart, rendered on the server
        "dash-host:1",
        "Kafka topics",
        "PostgreSQL",
        "final boom",  # the timeline of failed attempts
        "dead letter",
        "?execution__status=RETRYING",  # every figure links to the filtered list
        'src="/static/dashboard/dashboard.js"',
    ):
        assert expected in content, expected
    assert "cdn" not in content.lower()
    assert response.context["kafka"].ok, response.context["kafka"].error


def test_live_endpoint_returns_the_panels_and_figures_that_change(admin_client):
    before = admin_client.get(LIVE).json()
    submitted_job()
    after = admin_client.get(LIVE).json()

    assert after["figures"]["counts"]["pending"] == before["figures"]["counts"]["pending"] + 1
    assert "jw-tile" in after["html"]
    assert after["figures"]["database"]["ok"] is True
    assert isinstance(after["figures"]["kafka"]["topics"], list)


def test_the_dashboard_shows_each_queues_work_executors_and_settings(admin_client):
    Queue.objects.create(name="reports", max_running=1, weight=3)
    live_executor("dash-host:1", slots=4, queues=["reports"])
    submitted_job(queueName="reports")
    started(submitted_job(queueName="reports").id)
    queue_pause(scope="QUEUE", name="reports")

    response = admin_client.get(DASHBOARD)

    [reports] = [q for q in response.context["queues"] if q["name"] == "reports"]
    assert reports == {
        "name": "reports", "waiting": 1, "running": 1, "executors": 2, "maxRunning": 1,
        "weight": 3, "paused": True,
    }  # fmt: skip
    table = response.content.decode().split('id="jw-queues"')[1].split("</table>")[0]
    assert "reports" in table and "at cap" in table and "paused" in table
    live = admin_client.get(LIVE).json()
    assert reports in live["figures"]["queues"]


def test_dead_letter_desk_groups_by_final_error_and_retries_a_group(admin_client):
    timeouts = [dead_letter("upstream timed out") for _ in range(2)]
    other = dead_letter("bad input")

    page = admin_client.get(DESK)

    groups = {group["error"]: group["count"] for group in page.context["groups"]}
    assert groups["upstream timed out"] == 2 and groups["bad input"] == 1
    confirm = admin_client.post(DESK, {"action": "retry", "error": "upstream timed out"})
    assert confirm.context["count"] == 2
    assert all(execution_of(job.id).status == "FAILED" for job in timeouts)

    done = admin_client.post(
        DESK, {"action": "retry", "error": "upstream timed out", "confirm": "yes"}, follow=True
    )

    assert all(execution_of(job.id).status == "PENDING" for job in timeouts)
    assert execution_of(other.id).status == "FAILED"
    assert "Retried 2 jobs." in messages_of(done)
    assert LogEntry.objects.filter(change_message="Retry: 2 retried").exists()


def test_discarded_dead_letters_leave_the_desk_until_they_fail_again(admin_client):
    job = dead_letter("poison message")

    admin_client.post(DESK, {"action": "discard", "confirm": "yes"}, follow=True)

    assert execution_of(job.id).status == "FAILED"  # history and state kept
    assert "poison message" not in {g["error"] for g in admin_client.get(DESK).context["groups"]}
    summary = LogEntry.objects.filter(object_id=None).latest("action_time")
    assert summary.change_message.startswith("Discard: ") and "discarded" in summary.change_message

    job_retry(job_id=job.id)  # retried, and it dead-letters once more
    fail_attempt(Job.objects.get(id=job.id), "poison message", [])

    assert "poison message" in {g["error"] for g in admin_client.get(DESK).context["groups"]}


def test_view_only_staff_see_the_desk_without_buttons_and_cannot_post(client):
    viewer = get_user_model().objects.create_user(
        username=f"viewer-{uuid.uuid4().hex[:8]}", password="x", is_staff=True
    )
    # An operator who may look at every tenant's work (§17), not act on it.
    viewer.user_permissions.add(
        Permission.objects.get(codename="view_job"),
        Permission.objects.get(codename="view_all_jobs"),
    )
    client.force_login(viewer)
    job = dead_letter()

    page = client.get(DESK)

    assert page.status_code == 200
    assert 'name="action"' not in page.content.decode()
    assert client.post(DESK, {"action": "retry", "confirm": "yes"}).status_code == 403
    assert client.get(DASHBOARD).status_code == 200
    assert execution_of(job.id).status == "FAILED"


def test_the_admin_submit_form_routes_to_a_queue(admin_client):
    admin_client.post(
        SUBMIT,
        {
            "job_type": "SIMULATION",
            "steps": json.dumps([{"action": "LOG", "message": "on a GPU"}]),
            "priority": 5,
            "idempotency_key": "form-queue",
            "queue_name": "gpu",
        },
    )

    assert Job.objects.get(idempotency_key="form-queue").queue_name == "gpu"


def test_submit_a_simulation_job_from_the_admin(admin_client):
    response = admin_client.post(
        SUBMIT,
        {
            "job_type": "SIMULATION",
            "steps": json.dumps([{"action": "LOG", "message": "from the form"}]),
            "priority": 6,
            "max_retry_count": 2,
            "idempotency_key": "form-1",
        },
        follow=True,
    )

    job = Job.objects.get(idempotency_key="form-1")
    assert response.redirect_chain[-1][0] == reverse(
        "admin:jobweaver_jobs_job_change", args=[job.id]
    )
    assert (job.priority, job.max_retries, job.steps) == (
        6,
        2,
        [{"action": "LOG", "message": "from the form"}],
    )
    assert job.submitted_by is not None
    assert f"Submitted job {job.id}." in messages_of(response)


def test_submit_a_task_job_from_the_admin(admin_client):
    page = admin_client.get(SUBMIT)
    assert "jobweaver_site.examples.tasks.add" in page.content.decode()  # registered tasks offered

    admin_client.post(
        SUBMIT,
        {
            "job_type": "TASK",
            "task": "jobweaver_site.examples.tasks.add",
            "args": "[2, 3]",
            "kwargs": "{}",
            "priority": 5,
            "idempotency_key": "form-task",
        },
    )

    job = Job.objects.get(idempotency_key="form-task")
    assert job.job_type == "TASK"
    assert job.instruction["task"] == "jobweaver_site.examples.tasks.add"
    assert job.instruction["args"] == [2, 3]


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"job_type": "SIMULATION", "steps": "[{"}, "not JSON"),
        ({"job_type": "SIMULATION", "steps": '[{"action": "EXPLODE"}]'}, "action"),
        ({"job_type": "TASK", "task": "", "args": "[]"}, "choose the task"),
        (
            {"job_type": "TASK", "task": "jobweaver_site.examples.tasks.add", "args": "[1]"},
            "argument",
        ),
        (
            {
                "job_type": "SIMULATION",
                "steps": '[{"action": "LOG", "message": "x"}]',
                "run_at": "yesterday",
            },
            "runAt",
        ),
    ],
)
def test_submit_form_rejects_what_the_api_rejects(admin_client, fields, error):
    before = Job.objects.count()

    response = admin_client.post(SUBMIT, {"priority": 5, **fields})

    assert response.status_code == 200
    assert error.lower() in response.content.decode().lower()
    assert Job.objects.count() == before
