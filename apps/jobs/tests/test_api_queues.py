"""/api/queues and `manage.py queues`: every queue with its work, executors and settings (counts
of one's own jobs unless view_all_jobs), changing a queue's cap and weight field by field, and
what a bad request or a missing permission leaves behind (nothing). What the settings do to
dispatch: apps/scheduler/tests/test_queues.py."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from jobweaver.jobs.tests.api_helpers import api_client, assert_error_body
from jobweaver.jobs.tests.test_api_controls import send
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.models import JobExecution, Queue
from jobweaver.scheduler.services import queue_pause
from jobweaver.scheduler.tests.factories import live_executor, submitted_job

pytestmark = pytest.mark.django_db

CHANGE_QUEUE = "jobweaver_scheduler.change_queue"
VIEW_ALL = "jobweaver_jobs.view_all_jobs"


def _settings() -> list[tuple]:
    return list(Queue.objects.values_list("name", "max_running", "weight"))


def test_the_list_shows_each_queue_with_work_an_executor_or_settings():
    live_executor("host-a:1", slots=1, queues=["default", "reports"])  # two credits
    Queue.objects.create(name="nightly", max_running=5, weight=3)
    submitted_job(queueName="reports")
    submitted_job(queueName="reports")
    submitted_job(queueName="bulk")
    dispatch_due_jobs(publish=lambda deliveries: None)
    queue_pause(scope="QUEUE", name="bulk")

    response = api_client("ops", VIEW_ALL).get("/api/queues")

    assert response.status_code == 200, response.content
    assert response.json() == {
        "queues": [
            {"name": "bulk", "waiting": 1, "running": 0, "executors": 0, "maxRunning": None,
             "weight": 1, "paused": True},
            {"name": "default", "waiting": 0, "running": 0, "executors": 1, "maxRunning": None,
             "weight": 1, "paused": False},
            {"name": "nightly", "waiting": 0, "running": 0, "executors": 0, "maxRunning": 5,
             "weight": 3, "paused": False},
            {"name": "reports", "waiting": 0, "running": 2, "executors": 1, "maxRunning": None,
             "weight": 1, "paused": False},
        ]
    }  # fmt: skip


def test_a_user_without_view_all_jobs_counts_only_their_own_jobs():
    client = api_client("alice", "jobweaver_jobs.view_job")
    alice = get_user_model().objects.get(username="alice")
    mine = submitted_job(queueName="reports")
    JobExecution.objects.filter(job=mine).update(submitted_by=alice)
    submitted_job(queueName="reports")  # someone else's

    [reports] = client.get("/api/queues").json()["queues"]
    assert (reports["name"], reports["waiting"]) == ("reports", 1)
    [everyone] = api_client("ops", VIEW_ALL).get("/api/queues").json()["queues"]
    assert everyone["waiting"] == 2


def test_put_changes_the_fields_given_and_keeps_the_others():
    client = api_client("ops", CHANGE_QUEUE)

    first = send(client, "PUT", "/api/queues/reports", {"maxRunning": 4})
    second = send(client, "PUT", "/api/queues/reports", {"weight": 7})
    uncapped = send(client, "PUT", "/api/queues/reports", {"maxRunning": None})

    assert first.status_code == 200, first.content
    assert (first.json()["maxRunning"], first.json()["weight"]) == (4, 1)
    assert (second.json()["maxRunning"], second.json()["weight"]) == (4, 7)
    assert (uncapped.json()["maxRunning"], uncapped.json()["weight"]) == (None, 7)
    assert set(uncapped.json()) == {
        "name", "waiting", "running", "executors", "maxRunning", "weight", "paused"
    }  # fmt: skip
    assert _settings() == [("reports", None, 7)]


@pytest.mark.parametrize(
    "raw",
    [
        "{}",
        '{"maxRunning": 0}',
        '{"maxRunning": 10001}',
        '{"maxRunning": -1}',
        '{"maxRunning": 2.5}',
        '{"maxRunning": "2"}',
        '{"maxRunning": true}',
        '{"weight": 0}',
        '{"weight": 101}',
        '{"weight": null}',
        '{"weight": 2, "paused": true}',
        "[1]",
        "null",
        "{",
    ],
)
def test_a_bad_queue_request_is_400_and_changes_nothing(raw):
    Queue.objects.create(name="reports", max_running=3, weight=2)
    response = send(api_client("ops", CHANGE_QUEUE), "PUT", "/api/queues/reports", raw=raw)
    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert _settings() == [("reports", 3, 2)]


@pytest.mark.parametrize("name", ["Reports", "a.b", "-x", "x" * 65, "tab%09here"])
def test_a_bad_queue_name_is_400_and_changes_nothing(name):
    response = send(api_client("ops", CHANGE_QUEUE), "PUT", f"/api/queues/{name}", {"weight": 2})
    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert _settings() == []


def test_changing_a_queue_needs_change_queue():
    Queue.objects.create(name="reports", max_running=3)
    assert_error_body(
        send(APIClient(), "PUT", "/api/queues/reports", {"weight": 2}), 401, "API.UNAUTHENTICATED"
    )
    for client in (
        api_client("staff", "jobweaver_jobs.change_job", is_staff=True),
        api_client("limiter", "jobweaver_scheduler.change_concurrencylimit"),
    ):
        response = send(client, "PUT", "/api/queues/reports", {"weight": 2})
        assert_error_body(response, 403, "API.FORBIDDEN")
    assert _settings() == [("reports", 3, 1)]
    assert api_client("reader", "jobweaver_jobs.view_job").get("/api/queues").status_code == 200


def test_a_raised_cap_set_through_the_api_lets_waiting_work_go():
    live_executor("host-a:1", slots=10, queues=["reports"])
    client = api_client("ops", CHANGE_QUEUE)
    send(client, "PUT", "/api/queues/reports", {"maxRunning": 1})
    for _ in range(4):
        submitted_job(queueName="reports")
    assert len(dispatch_due_jobs(publish=lambda deliveries: None)) == 1

    send(client, "PUT", "/api/queues/reports", {"maxRunning": 3})
    assert len(dispatch_due_jobs(publish=lambda deliveries: None)) == 2


# --- manage.py queues ----------------------------------------------------------------------------


def _queues(*args: str) -> tuple[int, str, str]:
    out, err = StringIO(), StringIO()
    try:
        call_command("queues", *args, stdout=out, stderr=err)
        code = 0
    except CommandError as error:  # the one-line reason JobWeaverCommand also prints
        return error.returncode, out.getvalue(), str(error)
    return code, out.getvalue(), err.getvalue()


def test_the_command_sets_a_queue_and_lists_it():
    submitted_job(queueName="reports")

    code, out, _ = _queues("set", "reports", "--max-running", "2", "--weight", "5")
    assert code == 0
    assert out.split("\n")[1].split() == ["reports", "1", "0", "0", "2", "5", "false"]

    assert _queues("set", "reports", "--max-running", "none")[0] == 0
    code, out, _ = _queues("list", "--json")
    assert json.loads(out) == [
        {"name": "reports", "waiting": 1, "running": 0, "executors": 0, "maxRunning": None,
         "weight": 5, "paused": False}
    ]  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        ("set", "reports"),
        ("set", "reports", "--max-running", "0"),
        ("set", "reports", "--max-running", "many"),
        ("set", "reports", "--weight", "101"),
        ("set", "Reports", "--weight", "2"),
        ("set",),
        ("drop", "reports"),
    ],
)
def test_the_command_refuses_bad_input_with_exit_2_and_changes_nothing(args):
    Queue.objects.create(name="reports", max_running=3, weight=2)
    code, _, err = _queues(*args)
    assert code == 2
    assert err.strip()
    assert _settings() == [("reports", 3, 2)]
