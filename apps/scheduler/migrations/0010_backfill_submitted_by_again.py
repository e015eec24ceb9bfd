"""The submitter's copy again, for executions still waiting or running that 0008 missed.

0008 backfilled the executions that existed when it ran. A web process of the release before
0008 kept inserting executions without the copy until it was replaced, and the per-user cap
(JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER) does not count those. This migration ships a release
later, once no process of that release is left, and fills them in. Only unfinished executions
matter to the cap, so only they are read (through the partial indexes of waiting and live
ones); running it again changes nothing.
"""

from django.db import migrations

BACKFILL = """
    UPDATE scheduler_jobexecution e SET submitted_by_id = j.submitted_by_id
    FROM jobs_job j
    WHERE j.id = e.job_id AND j.submitted_by_id IS NOT NULL AND e.submitted_by_id IS NULL
      AND e.status IN ('PENDING', 'DISPATCHED', 'RUNNING')
"""


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler", "0009_queue_line_index"),
    ]

    operations = [
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
