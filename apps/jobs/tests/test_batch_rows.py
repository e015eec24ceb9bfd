"""A batch submission stores each job exactly as a single submission stores the same request
(the batch writes its rows from one JSON document, apps/core/db.insert_rows)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from jobweaver.jobs.models import Job
from jobweaver.jobs.services import job_submit, job_submit_batch, jobs_create_waiting
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import JobExecution

pytestmark = pytest.mark.django_db

# Stored per submission, not per request.
OWN = {"id", "trace_id", "created_at", "updated_at"}

REQUESTS = [
    {
        "jobType": "SIMULATION",
        "payload": {
            "steps": [
                {"action": "LOG", "message": "say \"hi\" \\ back—slash, ünïcode ✓ and 'quotes'"},
                {"action": "SLEEP", "durationMs": 5},
            ]
        },
    },
    {
        "jobType": "TASK",
        "payload": {"task": "jobweaver_site.examples.tasks.add", "args": [1, 2.5], "kwargs": {}},
        "priority": 6,
        "maxRetryCount": 2,
        "timeoutSeconds": 30,
        "queueName": "reports",
        "concurrencyKey": "customer-7",
        "runAt": (timezone.now() + timedelta(hours=1, microseconds=123457)).isoformat(),
    },
]


@pytest.mark.parametrize("body", REQUESTS, ids=["simulation", "task-with-every-option"])
def test_a_batch_stores_each_job_as_a_single_submit_does(body, django_user_model):
    user = django_user_model.objects.create_user("batcher")
    single = job_submit(spec=parse_job_request(body), submitted_by=user).job
    [batched] = job_submit_batch(specs=[parse_job_request(body)], submitted_by=user)

    rows = {row["id"]: row for row in Job.objects.filter(pk__in=[single.pk, batched.pk]).values()}
    stored_single, stored_batched = rows[single.pk], rows[batched.pk]
    assert {k: v for k, v in stored_batched.items() if k not in OWN} == {
        k: v for k, v in stored_single.items() if k not in OWN
    }
    # What the batch hands back is what it stored, to the microsecond.
    assert {f.attname: getattr(batched, f.attname) for f in Job._meta.concrete_fields} == (
        stored_batched
    )
    assert batched.execution.job_id == batched.pk


def _fields(execution: JobExecution) -> dict:
    # With each value's type: a plain str, not an enum member, as a read from the table gives.
    return {
        f.attname: (getattr(execution, f.attname), type(getattr(execution, f.attname)))
        for f in JobExecution._meta.concrete_fields
    }


def test_the_executions_a_batch_hands_back_are_what_it_stored(django_user_model):
    user = django_user_model.objects.create_user("batcher")
    jobs = job_submit_batch(
        specs=[parse_job_request(body) for body in REQUESTS * 2], submitted_by=user
    )
    stored = JobExecution.objects.in_bulk([job.execution.pk for job in jobs])
    assert len(stored) == len(jobs)
    for job in jobs:
        assert job.execution.job_id == job.pk
        assert job.execution._state.adding is False
        assert _fields(job.execution) == _fields(stored[job.execution.pk])
    # Due in submission order: the claim orders by next_run_at, so each row has its own time.
    due_now = [job.execution.next_run_at for job in jobs if job.run_at is None]
    assert due_now == sorted(due_now) and len(set(due_now)) == len(due_now)


def test_the_waiting_executions_handed_back_are_what_was_stored():
    specs = [parse_job_request(REQUESTS[0]) for _ in range(3)]
    with transaction.atomic():
        jobs = jobs_create_waiting(specs=specs, waiting={1}, submitted_by=None, trace_id="t")
    assert [job.execution.status for job in jobs] == ["PENDING", "WAITING", "PENDING"]
    stored = JobExecution.objects.in_bulk([job.execution.pk for job in jobs])
    for job in jobs:
        assert _fields(job.execution) == _fields(stored[job.execution.pk])
