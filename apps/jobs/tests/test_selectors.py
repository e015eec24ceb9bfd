"""`job_detail`, the one job detail of the API and the command line (ARCHITECTURE §8): its exact
shape, attempts oldest first, progress, and who may see it."""

from __future__ import annotations

import re
import uuid

import pytest
from django.contrib.auth import get_user_model

from jobweaver.accounts.tests.helpers import grant
from jobweaver.core.errors import JobNotFound
from jobweaver.jobs.selectors import job_detail
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import ExecutionStatus
from jobweaver.scheduler.tests.factories import finished, make_due, submitted_job

pytestmark = pytest.mark.django_db

DETAIL_FIELDS = {
    "jobId", "jobType", "status", "payload", "priority", "maxRetryCount", "retryCount",
    "nextRunAt", "lastError", "traceId", "createdAt", "updatedAt", "startedAt", "finishedAt",
    "progress", "attempts",
    # Added with pauses and per-key limits (README "Not yet in ARCHITECTURE").
    "queueName", "concurrencyKey", "workflowId", "dependsOn",
}  # fmt: skip
ATTEMPT_FIELDS = {
    "eventId", "attempt", "workerId", "startedAt", "finishedAt", "outcome", "errorMessage",
    "stepsCompleted",
}  # fmt: skip
ISO_MILLIS_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_a_pending_job_has_the_documented_fields_and_no_attempts():
    job = submitted_job([{"action": "LOG", "message": "a"}], priority=7, maxRetryCount=2)

    detail = job_detail(job_id=job.id)

    assert set(detail) == DETAIL_FIELDS
    assert detail["jobId"] == str(job.id)
    assert (detail["status"], detail["priority"], detail["maxRetryCount"]) == ("PENDING", 7, 2)
    assert detail["payload"] == {"steps": [{"action": "LOG", "message": "a"}]}
    assert detail["progress"] == {"stepsCompleted": 0, "totalSteps": 1}
    assert detail["attempts"] == []
    assert ISO_MILLIS_UTC.match(detail["createdAt"]) and ISO_MILLIS_UTC.match(detail["nextRunAt"])
    assert (detail["startedAt"], detail["finishedAt"], detail["lastError"]) == (None, None, None)


def test_a_retried_then_completed_job_lists_its_attempts_oldest_first():
    job = submitted_job([{"action": "FLAKY", "failTimes": 1}], maxRetryCount=3)
    finished(job.id, "FAILURE", "flaky")
    make_due(job.id)
    finished(job.id)

    detail = job_detail(job_id=str(job.id))

    assert detail["status"] == ExecutionStatus.COMPLETED
    assert detail["nextRunAt"] is None  # only a PENDING job has a next run
    assert detail["progress"] == {"stepsCompleted": 1, "totalSteps": 1}
    assert [set(a) for a in detail["attempts"]] == [ATTEMPT_FIELDS, ATTEMPT_FIELDS]
    assert [(a["attempt"], a["outcome"]) for a in detail["attempts"]] == [
        (1, "FAILURE"),
        (2, "SUCCESS"),
    ]
    assert detail["attempts"][0]["errorMessage"] == "flaky"
    assert ISO_MILLIS_UTC.match(detail["attempts"][1]["finishedAt"])


def test_a_user_sees_only_their_own_jobs_and_view_all_jobs_sees_all():
    users = get_user_model().objects
    owner, other = users.create_user("owner"), users.create_user("other")
    # Staff status alone grants nothing; the permission does.
    staff = grant(users.create_user("staff", is_staff=True), "jobweaver_jobs.view_all_jobs")
    staff_only = users.create_user("staff-only", is_staff=True)
    body = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "a"}]}}
    job = job_submit(spec=parse_job_request(body), submitted_by=owner).job

    assert job_detail(job_id=job.id, user=owner)["jobId"] == str(job.id)
    assert job_detail(job_id=job.id, user=staff)["jobId"] == str(job.id)
    for stranger in (other, staff_only):
        with pytest.raises(JobNotFound):
            job_detail(job_id=job.id, user=stranger)


@pytest.mark.parametrize("job_id", ["not-a-uuid", str(uuid.UUID(int=7))])
def test_a_malformed_or_unknown_id_is_not_found(job_id):
    with pytest.raises(JobNotFound):
        job_detail(job_id=job_id)
