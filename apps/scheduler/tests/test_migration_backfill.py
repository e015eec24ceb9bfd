"""scheduler.0010: executions inserted without the submitter's copy (by a web process of the
release before 0008) get it, if they are still waiting or running; the per-user cap counts
them again."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from apps.jobs.models import Job
from apps.scheduler.models import JobExecution
from apps.scheduler.tests.factories import finished, live_executor, started, submitted_job

pytestmark = pytest.mark.django_db(transaction=True)  # migrations run outside a test transaction

BEFORE = ("scheduler", "0009_queue_line_index")
AFTER = ("scheduler", "0010_backfill_submitted_by_again")


def migrate_to(target) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])


def test_unfinished_executions_without_the_submitters_copy_get_it():
    user = get_user_model().objects.create_user("alice")
    waiting, running, done = (submitted_job() for _ in range(3))
    live_executor()
    started(running.id)
    finished(done.id)
    Job.objects.update(submitted_by=user)
    JobExecution.objects.update(submitted_by=None)  # as the old release's web inserted them

    migrate_to(BEFORE)
    try:
        migrate_to(AFTER)
    finally:
        migrate_to(AFTER)  # the schema the other tests expect, whatever happened

    copies = dict(JobExecution.objects.values_list("job_id", "submitted_by"))
    assert copies == {waiting.id: user.id, running.id: user.id, done.id: None}
