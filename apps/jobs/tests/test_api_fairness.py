"""Fairness and failure (OWASP API4, API8): the per-user submission throttle answers 429 with
Retry-After and recovers; the per-user cap on waiting and running jobs holds under 20
concurrent clients (real threads, real PostgreSQL connections); server errors are the error
body without details."""

from __future__ import annotations

import json
import threading

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user, token_for
from jobweaver.jobs import services
from jobweaver.jobs.api import views
from jobweaver.jobs.models import Job
from jobweaver.jobs.selectors import active_job_count
from jobweaver.jobs.tests.api_helpers import assert_error_body, counts
from tests.sessions import held_by_another_session
from tests.stack import wait_for

BODY = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
CLIENTS = 20


def token_client(username: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(make_user(username, *SUBMITTER))}")
    return client


def post(client: APIClient, path: str = "/api/jobs", body: dict = BODY):
    return client.post(path, json.dumps(body), content_type="application/json")


# --- throttling --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_300_single_submits_from_one_client_all_pass_with_the_defaults():
    """The defect of issue 35: a client sending 300 single submits one after another was refused
    after 85 by the fixed window of 120 a minute. The bucket's burst takes them."""
    client = token_client("busy-client")

    statuses = [post(client).status_code for _ in range(300)]

    assert statuses == [202] * 300
    assert Job.objects.filter(submitted_by__username="busy-client").count() == 300


@pytest.mark.django_db
def test_a_burst_beyond_the_bucket_is_429_with_retry_after_and_persists_nothing(settings):
    settings.JOBWEAVER_SUBMIT_THROTTLE_BURST = 5
    settings.JOBWEAVER_SUBMIT_THROTTLE_RATE = 1  # one token per 10 s: none comes back in the test
    settings.JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS = 10
    alice, bob = token_client("alice"), token_client("bob")

    assert [post(alice).status_code for _ in range(5)] == [202] * 5
    before = counts()
    response = post(alice)

    assert_error_body(response, 429, "API.THROTTLED")
    assert 9 <= int(response["Retry-After"]) <= 10
    assert counts() == before  # the throttled request persisted nothing
    assert post(bob).status_code == 202  # one user's bucket is not another's


@pytest.mark.django_db
def test_the_bucket_refills_at_the_rate(settings):
    settings.JOBWEAVER_SUBMIT_THROTTLE_BURST = 3
    settings.JOBWEAVER_SUBMIT_THROTTLE_RATE = 10  # 10 per 2 s: a token every 0.2 s
    settings.JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS = 2
    alice = token_client("alice")
    accepted = 0
    while (response := post(alice)).status_code == 202:  # the burst, and what refilled meanwhile
        accepted += 1
        assert accepted <= 50
    assert accepted >= 3
    assert_error_body(response, 429, "API.THROTTLED")
    assert response["Retry-After"] == "1"  # 0.2 s at most, said in whole seconds

    wait_for(lambda: post(alice).status_code == 202, timeout=10, message="a token to come back")


@pytest.mark.django_db
def test_an_operator_is_not_throttled(settings):
    settings.JOBWEAVER_SUBMIT_THROTTLE_BURST = 1
    settings.JOBWEAVER_SUBMIT_THROTTLE_RATE = 1
    settings.JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS = 3600
    operator = APIClient()
    operator.credentials(
        HTTP_AUTHORIZATION="Token "
        + token_for(make_user("operator", *SUBMITTER, "jobweaver_jobs.operate_all_jobs"))
    )
    viewer = APIClient()  # seeing everyone's jobs is not operating: throttled
    viewer.credentials(
        HTTP_AUTHORIZATION="Token "
        + token_for(make_user("viewer", *SUBMITTER, "jobweaver_jobs.view_all_jobs"))
    )

    assert [post(operator).status_code for _ in range(5)] == [202] * 5
    assert [post(viewer).status_code for _ in range(2)] == [202, 429]


@pytest.mark.django_db
def test_reads_are_not_throttled(settings):
    settings.JOBWEAVER_SUBMIT_THROTTLE_BURST = 1
    client = token_client("carol")
    assert [client.get("/api/jobs").status_code for _ in range(5)] == [200] * 5


LOG = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
WORKFLOW = {
    "name": "pair",
    "jobs": [{"ref": "a", "job": LOG}, {"ref": "b", "dependsOn": ["a"], "job": LOG}],
}


@pytest.mark.django_db
def test_a_batch_and_a_workflow_count_as_one_request_each(settings):
    settings.JOBWEAVER_SUBMIT_THROTTLE_BURST = 2
    settings.JOBWEAVER_SUBMIT_THROTTLE_RATE = 1
    settings.JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS = 3600
    client = token_client("dave")
    assert post(client, "/api/jobs/batch", {"jobs": [BODY] * 5}).status_code == 202
    assert post(client, "/api/workflows", WORKFLOW).status_code == 202
    assert_error_body(post(client, "/api/jobs/batch", {"jobs": [BODY]}), 429, "API.THROTTLED")
    assert_error_body(post(client, "/api/workflows", WORKFLOW), 429, "API.THROTTLED")


@pytest.mark.django_db
def test_retries_take_from_the_submit_bucket_and_cancels_from_their_own(settings):
    """Retry queues the work again: it is throttled with the submits. Cancels are throttled
    too, from a bucket of their own: a user out of submits can still cancel."""
    settings.JOBWEAVER_SUBMIT_THROTTLE_BURST = 3
    settings.JOBWEAVER_SUBMIT_THROTTLE_RATE = 1
    settings.JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS = 3600
    client = token_client("ruth")
    first, second = (post(client).json()["jobId"] for _ in range(2))
    workflow = post(client, "/api/workflows", WORKFLOW)  # the third submit token
    assert workflow.status_code == 202

    assert client.post(f"/api/jobs/{first}/cancel").status_code == 200
    assert client.post(f"/api/jobs/{second}/cancel").status_code == 200
    retry = client.post(f"/api/jobs/{first}/retry")  # no submit token left
    assert_error_body(retry, 429, "API.THROTTLED")
    assert int(retry["Retry-After"]) >= 1
    assert Job.objects.get(id=first).execution.status == "CANCELLED"  # not retried
    workflow_id = workflow.json()["workflowId"]
    assert client.post(f"/api/workflows/{workflow_id}/cancel").status_code == 200
    assert_error_body(client.post(f"/api/jobs/{second}/cancel"), 429, "API.THROTTLED")


# --- the per-user cap under concurrency ---------------------------------------------------------


def run_concurrently(requests: list) -> list:
    """Run each callable on its own thread (own database connection), released together."""
    barrier = threading.Barrier(len(requests))
    results: list = [None] * len(requests)

    def run(index: int, request) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = request()
        finally:
            connection.close()  # this thread's connection

    threads = [threading.Thread(target=run, args=(i, r)) for i, r in enumerate(requests)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


@pytest.fixture
def concurrent_submitters(settings, monkeypatch):
    settings.JOBWEAVER_SUBMIT_THROTTLE_RATE = 1_000_000
    # Only the cap is under test: no broker work after each commit.
    monkeypatch.setattr("jobweaver.outbox.services.relay_soon", lambda: None)
    monkeypatch.setattr("jobweaver.jobs.services.dispatch_job_now", lambda job_id: None)
    monkeypatch.setattr("jobweaver.jobs.services._dispatch_now", lambda job_ids: None)


@pytest.mark.django_db(transaction=True)
def test_the_active_jobs_cap_holds_under_20_concurrent_clients(settings, concurrent_submitters):
    settings.JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER = 5
    user = make_user("erin", *SUBMITTER)
    key = token_for(user)

    def submit():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return post(client)

    responses = run_concurrently([submit] * CLIENTS)

    statuses = sorted(response.status_code for response in responses)
    assert statuses == [202] * 5 + [429] * (CLIENTS - 5)
    assert Job.objects.filter(submitted_by=user).count() == 5
    refused = next(r for r in responses if r.status_code == 429)
    assert_error_body(refused, 429, "API.THROTTLED")
    assert "at most 5 jobs may wait or run" in refused.json()["message"]


@pytest.mark.django_db(transaction=True)
def test_the_cap_counts_every_job_of_concurrent_batches(settings, concurrent_submitters):
    settings.JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER = 7
    user = make_user("frank", *SUBMITTER)
    key = token_for(user)

    def submit_batch():
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        return post(client, "/api/jobs/batch", {"jobs": [BODY, BODY]})

    responses = run_concurrently([submit_batch] * CLIENTS)

    assert sorted(r.status_code for r in responses) == [202] * 3 + [429] * (CLIENTS - 3)
    assert Job.objects.filter(submitted_by=user).count() == 6


@pytest.mark.django_db(transaction=True)
def test_a_users_batch_is_not_held_behind_another_batch_still_writing(
    settings, concurrent_submitters, monkeypatch
):
    """One user's parallel clients (one service account, several threads): a batch whose jobs
    are still being written holds no lock that the same user's next batch waits for. Only the
    cap's count and the commit run one at a time."""
    settings.JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER = 100
    user = make_user("hana", *SUBMITTER)
    key = token_for(user)
    first_writing, let_first_finish = threading.Event(), threading.Event()
    enqueue = services.executions_create

    def enqueue_then_stall(**kwargs):
        # The first batch stops after writing its jobs and events, inside its transaction.
        executions = enqueue(**kwargs)
        if threading.current_thread().name == "first":
            first_writing.set()
            let_first_finish.wait(timeout=60)
        return executions

    monkeypatch.setattr(services, "executions_create", enqueue_then_stall)
    responses: dict = {}

    def submit(name: str, count: int) -> None:
        try:
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
            responses[name] = post(client, "/api/jobs/batch", {"jobs": [BODY] * count})
        finally:
            connection.close()  # this thread's connection

    first = threading.Thread(target=submit, args=("first", 3), name="first")
    second = threading.Thread(target=submit, args=("second", 2), name="second")
    first.start()
    try:
        assert first_writing.wait(timeout=30), "the first batch never wrote its jobs"
        second.start()
        second.join(timeout=30)
        assert not second.is_alive(), "the second batch waited for the first one's transaction"
        assert responses["second"].status_code == 202
    finally:
        let_first_finish.set()
        first.join(timeout=60)
        second.join(timeout=60)
    assert responses["first"].status_code == 202
    assert Job.objects.filter(submitted_by=user).count() == 5
    assert active_job_count(user=user) == 5


@pytest.mark.django_db
def test_finished_jobs_free_the_cap(settings):
    settings.JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER = 1
    client = token_client("grace")
    job_id = post(client).json()["jobId"]
    assert_error_body(post(client), 429, "API.THROTTLED")
    assert client.post(f"/api/jobs/{job_id}/cancel").status_code == 200
    assert post(client).status_code == 202


@pytest.mark.django_db
def test_the_cap_counts_the_users_waiting_and_running_jobs_and_nobody_elses(settings):
    """The count reads the submitter copied onto each execution (single and batch submissions
    both copy it): another user's backlog neither counts nor blocks, and jobs in flight count
    until they finish."""
    settings.JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER = 4
    settings.JOBWEAVER_SUBMIT_THROTTLE_RATE = 1_000_000
    ivan, judy = token_client("ivan"), token_client("judy")
    batch = post(ivan, "/api/jobs/batch", {"jobs": [BODY] * 4}).json()["jobs"]
    ids = [job["jobId"] for job in batch]
    for _ in range(4):  # judy at the cap: her jobs must not count for ivan
        assert post(judy).status_code == 202
    with connection.cursor() as cursor:  # as dispatch and the executor would move them
        for job_id, status in zip(ids[1:], ["DISPATCHED", "RUNNING", "COMPLETED"], strict=True):
            cursor.execute(
                "UPDATE jobweaver_scheduler_jobexecution SET status = %s WHERE job_id = %s",
                [status, job_id],
            )

    assert active_job_count(user=User.objects.get(username="ivan")) == 3
    assert active_job_count(user=User.objects.get(username="judy")) == 4
    assert post(ivan).status_code == 202  # 3 + 1 = the cap
    refused = post(ivan)
    assert_error_body(refused, 429, "API.THROTTLED")
    assert "you have 4" in refused.json()["message"]


@pytest.mark.django_db
def test_high_priorities_need_the_permission(settings):
    settings.JOBWEAVER_PRIORITY_PERMISSION_ABOVE = 6
    plain, privileged = token_client("heidi"), APIClient()
    privileged.force_authenticate(
        make_user("ivan", *SUBMITTER, "jobweaver_jobs.submit_high_priority")
    )

    assert post(plain, body={**BODY, "priority": 6}).status_code == 202
    assert_error_body(post(plain, body={**BODY, "priority": 7}), 403, "API.FORBIDDEN")
    batch = {"jobs": [BODY, {**BODY, "priority": 9}]}
    assert_error_body(post(plain, "/api/jobs/batch", batch), 403, "API.FORBIDDEN")
    assert post(privileged, body={**BODY, "priority": 9}).status_code == 202


# --- server errors ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_server_error_in_a_view_is_the_error_body_without_details(monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(views, "job_stats", broken)

    response = token_client("judy").get("/api/stats")

    assert_error_body(response, 500, "API.INTERNAL_ERROR")
    assert "secret" not in response.content.decode()


@pytest.mark.django_db
def test_a_server_error_outside_the_views_is_the_error_body_too(monkeypatch):
    def broken(path):
        raise RuntimeError("secret internals")

    monkeypatch.setattr("jobweaver.jobs.api.middleware.body_limit", broken)

    response = Client(raise_request_exception=False).get("/api/jobs")

    assert_error_body(response, 500, "API.INTERNAL_ERROR")
    assert "secret" not in response.content.decode()


def cap_lock_held_by_another_session(user, *, settings: list[str]):
    """Another session holds `user`'s cap lock (a concurrent submission about to commit, in
    slow motion) while the test client's requests run with `settings`."""
    return held_by_another_session(
        "SELECT pg_advisory_lock(%s, %s)",
        [services.ACTIVE_CAP_LOCK_NAMESPACE, user.pk],
        settings=settings,
    )


@pytest.mark.django_db(transaction=True)
def test_a_request_that_times_out_on_a_lock_is_told_to_retry_and_changes_nothing():
    """Another session holds the user's cap lock: the submit gives up after lock_timeout
    with a retryable 429, not a 500."""
    user = make_user("ivan", *SUBMITTER)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    before = counts()
    with cap_lock_held_by_another_session(user, settings=["lock_timeout = '200ms'"]):
        response = post(client)

    assert_error_body(response, 429, "API.THROTTLED")
    assert response["Retry-After"] == "1"
    assert "retry" in response.json()["message"]
    assert counts() == before
    assert post(client).status_code == 202  # the lock is gone: the same request goes through


@pytest.mark.django_db(transaction=True)
def test_a_request_whose_statement_is_cancelled_says_so_and_changes_nothing():
    """A statement over the statement timeout (here the cap lock's wait, with no lock timeout)
    is a server fault, 500, but the body says what happened, and nothing was saved."""
    user = make_user("judy", *SUBMITTER)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    before = counts()
    with cap_lock_held_by_another_session(
        user, settings=["lock_timeout = 0", "statement_timeout = '200ms'"]
    ):
        response = post(client)

    assert_error_body(response, 500, "API.INTERNAL_ERROR")
    assert "cancelled a statement of this request that ran too long" in response.json()["message"]
    assert counts() == before
