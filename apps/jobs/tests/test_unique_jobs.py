"""Unique jobs: a submission whose `uniqueKey` matches one of the submitter's jobs in the
requested scope returns that job (200) instead of creating one; under concurrency too."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from jobweaver.accounts.tests.helpers import make_user
from jobweaver.executor.services import attempt_finish
from jobweaver.jobs.management.commands.submit_job import Command
from jobweaver.jobs.models import Job
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.tests.api_helpers import api_client, assert_error_body
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.tests.factories import finished, started

LOG = {"steps": [{"action": "LOG", "message": "hello"}]}


def body(key: str | None = "nightly-report", **fields) -> dict:
    request = {"jobType": "SIMULATION", "payload": LOG, **fields}
    if key is not None:
        request["uniqueKey"] = key
    return request


@pytest.mark.django_db
def test_a_duplicate_returns_the_waiting_job_with_200_whatever_its_request():
    client = api_client("alice")
    first = client.post("/api/jobs", body(), format="json")
    assert first.status_code == 202
    other_steps = {"steps": [{"action": "SLEEP", "durationMs": 5}]}
    again = client.post("/api/jobs", {**body(), "payload": other_steps}, format="json")
    assert again.status_code == 200
    assert again.json()["jobId"] == first.json()["jobId"]
    assert again.json()["status"] == "PENDING"
    assert Job.objects.count() == 1
    # Keys are per submitter, like idempotency keys.
    assert api_client("bob").post("/api/jobs", body(), format="json").status_code == 202
    assert Job.objects.count() == 2


@pytest.mark.django_db
@pytest.mark.parametrize("scope", ["waiting", "active", "period"])
def test_two_owners_with_the_same_unique_key_never_get_each_others_job(scope):
    """§17, issue 35: unique keys are per owner, in every scope; code (no owner) is one more."""
    alice, bob = make_user("alice"), make_user("bob")
    period = {"uniqueForSeconds": 3600} if scope == "period" else {}
    spec = parse_job_request(body("customer-42-sync", uniqueScope=scope, **period))

    results = {owner: job_submit(spec=spec, submitted_by=owner) for owner in (alice, bob, None)}
    again = {owner: job_submit(spec=spec, submitted_by=owner) for owner in (alice, bob, None)}

    assert all(result.created for result in results.values())
    assert len({result.job.id for result in results.values()}) == 3
    assert {owner: result.job.submitted_by for owner, result in results.items()} == {
        alice: alice,
        bob: bob,
        None: None,
    }
    # Each owner's own duplicate is found, and only theirs.
    assert {owner: (r.created, r.job.id) for owner, r in again.items()} == {
        owner: (False, result.job.id) for owner, result in results.items()
    }


@pytest.mark.django_db
def test_scopes_waiting_active_and_period():
    def submit(**fields):
        return job_submit(spec=parse_job_request(body(**fields)))

    running = submit(uniqueScope="waiting").job
    attempt = started(running.id)
    # waiting: a RUNNING job is no longer a duplicate; active: it is.
    waiting = submit(uniqueScope="waiting")
    assert waiting.created
    active = submit(uniqueScope="active")
    assert (active.created, active.job.id) == (False, waiting.job.id)  # the newest in scope
    finished(waiting.job.id)
    assert attempt_finish(
        claimed=attempt, outcome="SUCCESS", error="", steps_completed=1, log_lines=[]
    )
    fresh = submit()  # default scope "active": everything with the key has ended
    assert fresh.created
    finished(fresh.job.id)
    # period: any job with the key submitted within uniqueForSeconds, ended or not.
    within = submit(uniqueScope="period", uniqueForSeconds=60)
    assert (within.created, within.job.id) == (False, fresh.job.id)
    Job.objects.filter(unique_key="nightly-report").update(
        created_at=timezone.now() - timedelta(minutes=2)
    )
    assert submit(uniqueScope="period", uniqueForSeconds=60).created


@pytest.mark.django_db
def test_a_batch_item_gets_the_existing_or_the_earlier_items_job():
    client = api_client("alice")
    existing = client.post("/api/jobs", body("k2"), format="json").json()["jobId"]
    items = [body("k1"), body("k1"), body("k2"), body(None)]
    response = client.post("/api/jobs/batch", {"jobs": items}, format="json")
    assert response.status_code == 202
    ids = [job["jobId"] for job in response.json()["jobs"]]
    assert ids[0] == ids[1]
    assert ids[2] == existing
    assert len(set(ids)) == 3
    assert Job.objects.count() == 3


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"uniqueKey": None, "uniqueScope": "waiting"}, "need a uniqueKey"),
        ({"uniqueScope": "period"}, "needs uniqueForSeconds"),
        ({"uniqueForSeconds": 5}, 'goes with uniqueScope "period"'),
        ({"uniqueScope": "forever"}, "uniqueScope must be one of"),
        ({"uniqueKey": ""}, "uniqueKey must be a string"),
        ({"uniqueKey": "a\u2028b"}, "printable"),
    ],
)
def test_bad_unique_fields_are_refused(fields, message):
    response = api_client("alice").post("/api/jobs", {**body(), **fields}, format="json")
    assert message in assert_error_body(response, 400, "API.INVALID_REQUEST")["message"]
    assert Job.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_submits_of_one_key_create_one_job():
    """Real threads, each its own PostgreSQL connection and transaction, released together."""
    spec = parse_job_request(body("once-only"))
    start = threading.Barrier(20)
    results, errors = [], []

    def submit():
        try:
            start.wait(timeout=30)
            results.append(job_submit(spec=spec))
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=submit) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert len(results) == 20
    assert sum(result.created for result in results) == 1
    assert len({result.job.id for result in results}) == 1
    assert Job.objects.filter(unique_key="once-only").count() == 1


@pytest.mark.django_db
def test_cli_unique_key(run_command):
    first = run_command(Command, "submit_job", "--log", "x", "--unique-key", "cli-key")
    assert first.code == 0, first.err
    again = run_command(Command, "submit_job", "--log", "y", "--unique-key", "cli-key")
    assert again.code == 0, again.err
    assert "already submitted with this unique key" in again.out
    assert Job.objects.count() == 1
    period = run_command(
        Command, "submit_job", "--log", "x", "--unique-key", "cli-key", "--unique-scope", "period"
    )
    assert period.code == 2
    assert "needs uniqueForSeconds" in period.err
