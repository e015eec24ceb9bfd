"""The dashboard shows what is paused (with reason, who, since) and the concurrency limits,
in the page and in its live JSON, and resumes with one button."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import DELETION, LogEntry
from django.urls import reverse

from jobweaver.accounts.tests.helpers import make_user
from jobweaver.scheduler.models import Pause
from jobweaver.scheduler.services import concurrency_limit_set, queue_pause

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("jobweaver-dashboard")
LIVE = reverse("jobweaver-dashboard-live")
RESUME = reverse("jobweaver-resume")


def messages_of(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@pytest.fixture
def controls():
    queue_pause(scope="QUEUE", name="emails", reason="smtp provider down", paused_by="anna")
    queue_pause(scope="JOB_TYPE", name="TASK", paused_by="bob")
    concurrency_limit_set(pattern="customer-*", max_running=2, max_per_second=None)
    concurrency_limit_set(pattern="burst", max_running=None, max_per_second=5, is_global=True)


def test_the_page_shows_pauses_and_limits_with_resume_buttons(admin_client, controls):
    content = admin_client.get(DASHBOARD).content.decode()

    for expected in (
        "Paused queues and job types",
        "queue <strong>emails</strong>",
        "smtp provider down",
        "anna",
        "job type <strong>TASK</strong>",
        f'action="{RESUME}"',
        'name="name" value="emails"',
        "customer-*",
        "Concurrency limits",
        reverse("admin:jobweaver_scheduler_pause_changelist"),
        reverse("admin:jobweaver_scheduler_concurrencylimit_changelist"),
    ):
        assert expected in content, expected
    assert content.count('value="Resume"') == 2
    # Each limit's scope: customer-* per owner, burst global.
    assert "<td>per owner</td>" in content and "<td>global</td>" in content


def test_nothing_paused_says_so(admin_client):
    content = admin_client.get(DASHBOARD).content.decode()
    assert "Nothing is paused." in content and "No limits" in content
    assert 'value="Resume"' not in content


def test_the_live_json_carries_pauses_and_limits(admin_client, controls):
    live = admin_client.get(LIVE).json()

    pauses = {(p["scope"], p["name"]): p for p in live["figures"]["pauses"]}
    assert set(pauses) == {("QUEUE", "emails"), ("JOB_TYPE", "TASK")}
    emails = pauses[("QUEUE", "emails")]
    assert (emails["reason"], emails["pausedBy"]) == ("smtp provider down", "anna")
    assert emails["pausedAt"].endswith("Z")
    limits = {item["pattern"]: item for item in live["figures"]["limits"]}
    assert (limits["customer-*"]["maxRunning"], limits["burst"]["maxPerSecond"]) == (2, 5)
    assert (limits["customer-*"]["global"], limits["burst"]["global"]) == (False, True)
    assert "smtp provider down" in live["html"] and 'value="Resume"' in live["html"]


def test_the_resume_button_resumes_and_is_logged(admin_client, controls):
    response = admin_client.post(RESUME, {"scope": "QUEUE", "name": "emails"}, follow=True)

    assert response.redirect_chain[-1][0] == DASHBOARD
    assert "Resumed queue emails." in messages_of(response)
    assert list(Pause.objects.values_list("name", flat=True)) == ["TASK"]
    entry = LogEntry.objects.get(action_flag=DELETION)
    assert entry.object_repr == "QUEUE emails"

    again = admin_client.post(RESUME, {"scope": "QUEUE", "name": "emails"}, follow=True)
    assert "The queue emails was not paused: nothing was done." in messages_of(again)


@pytest.mark.parametrize(
    "fields", [{}, {"scope": "TOPIC", "name": "x"}, {"scope": "QUEUE", "name": "bad name"}]
)
def test_a_bad_resume_is_a_message_not_an_error_page(admin_client, controls, fields):
    response = admin_client.post(RESUME, fields, follow=True)
    assert response.status_code == 200
    assert any("must be" in message for message in messages_of(response))
    assert Pause.objects.count() == 2


def test_resume_needs_change_pause_and_a_post(client, controls):
    # An operator who may look (the dashboard is every tenant's, §17) but not resume.
    viewer = make_user(
        None, "jobweaver_jobs.view_job", "jobweaver_jobs.view_all_jobs", is_staff=True
    )
    client.force_login(viewer)

    page = client.get(DASHBOARD).content.decode()
    assert "smtp provider down" in page and 'value="Resume"' not in page
    assert client.post(RESUME, {"scope": "QUEUE", "name": "emails"}).status_code == 403
    assert Pause.objects.count() == 2

    operator = make_user(
        None, "jobweaver_jobs.view_job", "jobweaver_scheduler.change_pause", is_staff=True
    )
    client.force_login(operator)
    assert client.get(RESUME).status_code == 405
    assert client.post(RESUME, {"scope": "QUEUE", "name": "emails"}).status_code == 302
    assert Pause.objects.count() == 1
