"""The dispatcher's wake-up sleeps until the earliest waiting due time (database clock)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobweaver.scheduler.models import JobExecution
from jobweaver.scheduler.tests.factories import submitted_job
from jobweaver.scheduler.wakeup import seconds_until_due

pytestmark = pytest.mark.django_db


def test_seconds_until_the_earliest_pending_job_falls_due():
    JobExecution.objects.filter(status="PENDING").update(status="CANCELLED")  # only ours count
    connection.ensure_connection()
    assert seconds_until_due(connection.connection) is None

    later = submitted_job(runAt=(timezone.now() + timedelta(seconds=60)).isoformat())
    sooner = submitted_job(runAt=(timezone.now() + timedelta(seconds=20)).isoformat())
    assert 15 < seconds_until_due(connection.connection) <= 20

    JobExecution.objects.filter(job_id=sooner.id).update(status="CANCELLED")
    assert 55 < seconds_until_due(connection.connection) <= 60
    JobExecution.objects.filter(job_id=later.id).update(next_run_at=timezone.now())
    assert seconds_until_due(connection.connection) <= 0  # overdue: dispatch now
