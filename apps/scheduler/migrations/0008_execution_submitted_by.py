"""The submitter, copied onto each execution, and a partial index of each user's waiting ones.

The per-user cap (JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER) counts a user's waiting and running jobs
on every submission. Through a join of executions to jobs it read either every waiting
execution of everyone or every job the user ever kept: 23 ms per submission with another
user's 50,000 waiting (bench/cap_check.py). With the submitter on the execution it reads only
the user's own waiting executions (this index) and the few in flight (execution_live_leases).

Executions inserted by a web process still running the previous release while this migration
runs get no copy; the cap does not count them until they run (it is a limit, not state).
0010, a release later, copies it onto those still waiting or running.
"""

import django.db.models.deletion
from django.conf import settings
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models

BACKFILL = """
    UPDATE scheduler_jobexecution e SET submitted_by_id = j.submitted_by_id
    FROM jobs_job j
    WHERE j.id = e.job_id AND j.submitted_by_id IS NOT NULL AND e.submitted_by_id IS NULL
"""


class Migration(migrations.Migration):
    # The index is built without blocking writes on a live executions table.
    atomic = False

    dependencies = [
        ("jobs", "0007_drop_redundant_indexes"),
        ("scheduler", "0007_queue_table_autovacuum"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="jobexecution",
            name="submitted_by",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        AddIndexConcurrently(
            model_name="jobexecution",
            index=models.Index(
                models.F("submitted_by"),
                condition=models.Q(("status", "PENDING")),
                name="execution_pending_by_user",
            ),
        ),
    ]
