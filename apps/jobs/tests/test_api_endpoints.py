"""The endpoints of ARCHITECTURE §8 beyond submit/detail: batch, attempts, stats, list filters and
ordering, and `submit_job --count` (the same batch service from the shell)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from jobweaver.accounts.tests.helpers import SUBMITTER
from jobweaver.jobs import services
from jobweaver.jobs.management.commands.submit_job import Command as SubmitJob
from jobweaver.jobs.models import Job
from jobweaver.jobs.tests.api_helpers import api_client, assert_error_body, counts
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.models import JobExecution
from jobweaver.scheduler.tests.factories import finished

pytestmark = pytest.mark.django_db

LOG = {"action": "LOG", "message": "hi"}


def job_request(**fields) -> dict:
    return {"jobType": "SIMULATION", "payload": {"steps": [LOG]}, **fields}


def post(client: APIClient, path: str, body) -> object:
    return client.generic("POST", path, json.dumps(body), content_type="application/json")


def submit(client: APIClient, **fields) -> uuid.UUID:
    response = post(client, "/api/jobs", job_request(**fields))
    assert response.status_code == 202, response.content
    return uuid.UUID(response.json()["jobId"])


@pytest.fixture
def client():
    return api_client("alice", *SUBMITTER, "jobweaver_jobs.submit_high_priority")


# --- POST /api/jobs/batch ----------------------------------------------------------------------


def test_a_batch_is_persisted_in_bulk_and_dispatched_once(
    client, monkeypatch, django_capture_on_commit_callbacks
):
    dispatched: list[list] = []
    monkeypatch.setattr(
        services, "dispatch_due_jobs", lambda *, job_ids: dispatched.append(job_ids)
    )
    monkeypatch.setattr("jobweaver.outbox.services.relay_soon", lambda: None)
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    body = {"jobs": [job_request(priority=i % 10) for i in range(30)] + [job_request(runAt=later)]}

    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, "/api/jobs/batch", body)

    assert response.status_code == 202, response.content
    accepted = response.json()["jobs"]
    assert len(accepted) == 31
    assert {item["status"] for item in accepted} == {"PENDING"}
    ids = [item["jobId"] for item in accepted]
    assert counts() == (31, 31, 31)
    assert [str(job_id) for job_id in dispatched[0]] == ids and len(dispatched) == 1
    assert sorted(
        JobExecution.objects.filter(job_id__in=ids).values_list("priority", flat=True)
    ) == sorted([i % 10 for i in range(30)] + [5])
    delayed = JobExecution.objects.get(job_id=ids[-1])
    assert delayed.next_run_at == datetime.fromisoformat(later)
    event = OutboxEvent.objects.get(key=ids[0])
    assert event.topic == "job-created" and event.trace_id == accepted[0]["traceId"]
    assert sorted(OutboxEvent.objects.values_list("key", flat=True)) == sorted(ids)
    assert not OutboxEvent.objects.filter(published_at__isnull=False).exists()
    assert event.payload["jobId"] == ids[0] and event.payload["traceId"] == accepted[0]["traceId"]
    assert set(event.payload) == {
        "jobId", "traceId", "jobType", "priority", "maxRetryCount", "runAt", "createdAt",
    }  # fmt: skip


def test_a_batch_honours_one_trace_id_for_all_its_jobs(client):
    response = client.generic(
        "POST",
        "/api/jobs/batch",
        json.dumps({"jobs": [job_request(), job_request()]}),
        content_type="application/json",
        HTTP_X_TRACE_ID="batch-trace-1",
    )
    assert {item["traceId"] for item in response.json()["jobs"]} == {"batch-trace-1"}


def test_a_batch_with_bad_items_names_each_by_index_and_persists_nothing(client):
    body = {"jobs": [job_request(), job_request(priority=10), job_request(), {"jobType": "X"}]}

    response = post(client, "/api/jobs/batch", body)

    error = assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert [item["index"] for item in error["errors"]] == [1, 3]
    assert "jobs[1]: priority" in error["errors"][0]["message"]
    assert counts() == (0, 0, 0)


def test_a_batch_holds_at_most_the_limit(client, settings):
    settings.JOBWEAVER_MAX_BATCH_JOBS = 3
    response = post(client, "/api/jobs/batch", {"jobs": [job_request()] * 4})
    assert_error_body(response, 400, "API.INVALID_REQUEST")
    assert_error_body(post(client, "/api/jobs/batch", {"jobs": []}), 400, "API.INVALID_REQUEST")
    assert counts() == (0, 0, 0)


def test_a_thousand_jobs_fit_in_one_batch(client):
    response = post(client, "/api/jobs/batch", {"jobs": [job_request()] * 1000})
    assert response.status_code == 202, response.content
    assert counts() == (1000, 1000, 1000)


# --- GET /api/jobs/{id}/attempts ---------------------------------------------------------------


def test_attempts_lists_every_attempt_oldest_first(client):
    job_id = submit(client, maxRetryCount=2)
    finished(job_id, "FAILURE", "boom")
    JobExecution.objects.filter(job_id=job_id).update(next_run_at=datetime.now(UTC))
    finished(job_id)

    body = client.get(f"/api/jobs/{job_id}/attempts").json()

    assert body["jobId"] == str(job_id)
    assert [(a["attempt"], a["outcome"]) for a in body["attempts"]] == [
        (1, "FAILURE"),
        (2, "SUCCESS"),
    ]
    assert body["attempts"][0]["errorMessage"] == "boom"
    assert body["attempts"] == client.get(f"/api/jobs/{job_id}").json()["attempts"]


def test_attempts_of_someone_elses_job_is_404(client):
    job_id = post(client, "/api/jobs", job_request()).json()["jobId"]
    assert_error_body(
        api_client("bob").get(f"/api/jobs/{job_id}/attempts"), 404, "API.JOB_NOT_FOUND"
    )


# --- GET /api/stats ----------------------------------------------------------------------------


def test_stats_count_statuses_dead_letters_due_age_and_the_last_hour(client):
    ids = [submit(client, maxRetryCount=0) for _ in range(4)]
    finished(ids[0])
    finished(ids[1], "FAILURE", "boom")  # no retries left: dead-lettered
    JobExecution.objects.filter(job_id=ids[2]).update(
        next_run_at=datetime.now(UTC) - timedelta(minutes=5)
    )
    post(api_client("bob"), "/api/jobs", job_request())  # not alice's: not counted for her

    stats = client.get("/api/stats").json()

    assert stats["countsByStatus"] == {
        "WAITING": 0, "PENDING": 2, "DISPATCHED": 0, "RUNNING": 0, "COMPLETED": 1, "FAILED": 1,
        "CANCELLED": 0,
    }  # fmt: skip
    assert stats["deadLetters"] == 1
    assert 300 <= stats["oldestDueJobAgeSeconds"] < 3600
    assert stats["lastHour"] == {
        "completed": 1,
        "deadLettered": 1,
        "throughputPerMinute": round(1 / 60, 3),
        "attemptsFinished": 2,
        "attemptsFailed": 1,
        "failureRate": 0.5,
    }


def test_stats_of_a_user_without_jobs_are_zero(client):
    stats = client.get("/api/stats").json()
    assert stats["oldestDueJobAgeSeconds"] is None
    assert stats["lastHour"]["failureRate"] == 0.0
    assert sum(stats["countsByStatus"].values()) == 0


# --- list filters and ordering -----------------------------------------------------------------


def test_list_filters_by_priority_trace_id_and_created_range(client):
    low = post(client, "/api/jobs", job_request(priority=1)).json()["jobId"]
    high = post(client, "/api/jobs", job_request(priority=8)).json()["jobId"]
    traced = client.generic(
        "POST",
        "/api/jobs",
        json.dumps(job_request()),
        content_type="application/json",
        HTTP_X_TRACE_ID="find-me",
    ).json()["jobId"]
    Job.objects.filter(id=low).update(created_at=datetime(2020, 1, 1, tzinfo=UTC))

    def ids(query: str) -> list[str]:
        response = client.get(f"/api/jobs?{query}")
        assert response.status_code == 200, response.content
        return [job["jobId"] for job in response.json()["jobs"]]

    assert ids("priority=8") == [high]
    assert ids("traceId=find-me") == [traced]
    assert ids("createdBefore=2021-01-01T00:00:00Z") == [low]
    assert set(ids("createdAfter=2021-01-01T00:00:00%2B00:00")) == {high, traced}
    assert ids("createdAfter=2019-12-31T00:00:00Z&createdBefore=2020-01-02T00:00:00Z") == [low]


def test_list_orders_by_the_sort_key_with_ties_by_id(client):
    by_priority = {
        p: post(client, "/api/jobs", job_request(priority=p)).json()["jobId"] for p in (3, 9, 0)
    }
    ascending = [job["jobId"] for job in client.get("/api/jobs?sort=priority").json()["jobs"]]
    descending = [job["jobId"] for job in client.get("/api/jobs?sort=-priority").json()["jobs"]]
    assert ascending == [by_priority[0], by_priority[3], by_priority[9]]
    assert descending == list(reversed(ascending))
    oldest_first = [job["jobId"] for job in client.get("/api/jobs?sort=createdAt").json()["jobs"]]
    assert oldest_first == list(by_priority.values())


@pytest.mark.parametrize(
    "query",
    ["sort=id", "sort=priority,id", "priority=10", "priority=x", "createdAfter=yesterday",
     "createdBefore=2020-01-01T00:00:00", "page=%C2%B2", "page=" + "9" * 5000, "size=0"],
)  # fmt: skip
def test_bad_filters_are_400(client, query):
    assert_error_body(client.get(f"/api/jobs?{query}"), 400, "API.INVALID_REQUEST")


# --- submit_job --count ------------------------------------------------------------------------


def test_submit_job_count_submits_copies_in_one_batch(run_command, monkeypatch):
    calls = []
    real = services.job_submit_batch
    monkeypatch.setattr(
        "jobweaver.jobs.management.commands.submit_job.job_submit_batch",
        lambda **kwargs: calls.append(kwargs) or real(**kwargs),
    )
    result = run_command(SubmitJob, "submit_job", "--log", "x", "--count", "5", "--json")

    assert result.code == 0, result.err
    assert len(json.loads(result.out)["jobs"]) == 5
    assert len(calls) == 1
    assert counts() == (5, 5, 5)
    assert {job.instruction["steps"][0]["message"] for job in Job.objects.all()} == {"x"}


@pytest.mark.parametrize(
    "args", [["--count", "0"], ["--count", "1001"], ["--count", "2", "--wait"],
             ["--count", "2", "--idempotency-key", "k"]],
)  # fmt: skip
def test_submit_job_count_refuses_bad_combinations(run_command, args):
    result = run_command(SubmitJob, "submit_job", "--log", "x", *args)
    assert result.code == 2
    assert "--count" in result.err
    assert counts() == (0, 0, 0)
