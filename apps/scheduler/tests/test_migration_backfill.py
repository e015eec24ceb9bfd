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


def migrate_to(*targets) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(list(targets) or executor.loader.graph.leaf_nodes())


def test_unfinished_executions_without_the_submitters_copy_get_it():
    user = get_user_model().objects.create_user("alice")
    waiting, running, done = (submitted_job() for _ in range(3))
    live_executor()
    started(running.id)
    finished(done.id)
    Job.objects.update(submitted_by=user)
    JobExecution.objects.update(submitted_by=None)  # as the old release's web inserted them

    migrate_to(BEFORE)  # (later migrations are undone too)
    try:
        migrate_to(AFTER)
        with connection.cursor() as cursor:
            cursor.execute("SELECT job_id, submitted_by_id FROM scheduler_jobexecution")
            copies = dict(cursor.fetchall())
    finally:
        migrate_to()  # every migration again: the schema the other tests expect

    assert copies == {waiting.id: user.id, running.id: user.id, done.id: None}
