"""The active-jobs cap counts retries (§17): cancel-then-retry must not hold more of a user's
jobs waiting or running than a submit may."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user, token_for
from jobweaver.jobs.selectors import active_job_count
from jobweaver.jobs.tests.api_helpers import assert_error_body

BODY = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}


def submit(client: APIClient) -> str:
    response = client.post("/api/jobs", json.dumps(BODY), content_type="application/json")
    assert response.status_code == 202, response.content
    return response.json()["jobId"]


@pytest.mark.django_db
def test_a_retry_over_the_active_jobs_cap_is_refused_and_changes_nothing(settings, monkeypatch):
    monkeypatch.setattr("jobweaver.scheduler.services.dispatch_job_now", lambda job_id: None)
    monkeypatch.setattr("jobweaver.jobs.services._dispatch_now", lambda job_ids: None)
    monkeypatch.setattr("jobweaver.jobs.services.dispatch_job_now", lambda job_id: None)
    settings.JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER = 2
    user = make_user("kim", *SUBMITTER)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    first = submit(client)
    submit(client)  # the second of the two places
    assert client.post(f"/api/jobs/{first}/cancel").status_code == 200
    replacement = submit(client)  # the cancel freed a place, and it is taken again

    refused = client.post(f"/api/jobs/{first}/retry")

    assert_error_body(refused, 429, "API.THROTTLED")
    assert "at most 2 jobs may wait or run" in refused.json()["message"]
    assert client.get(f"/api/jobs/{first}").json()["status"] == "CANCELLED"
    assert active_job_count(user=user) == 2
    # Once a place is free again, the retry goes through.
    assert client.post(f"/api/jobs/{replacement}/cancel").status_code == 200
    assert client.post(f"/api/jobs/{first}/retry").status_code == 200
    assert client.get(f"/api/jobs/{first}").json()["status"] == "PENDING"
    assert active_job_count(user=user) == 2  # second and the retried first
