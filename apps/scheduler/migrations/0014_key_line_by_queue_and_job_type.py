"""A blocked key's waiting work per queue and job type: the set-aside scan no longer reads a
paused backlog.

0013 set a blocked key's work aside wherever it waited, paused or not, so that the scan would
not read past the paused part on every dispatch. That let keys pile up with paused work set
aside over a long pause, each of them probed by every dispatch's put-back once it had room.
Instead the scan now reads a blocked key's work line by line (one queue, one job type) and
skips the paused lines (lifecycle.executions_set_aside): paused work stays in line, where the
claim does not read it either. The key line index gains the queue and the job type after the
key; as in 0011 it is built concurrently under a temporary name, the old one dropped
concurrently, then renamed.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("scheduler", "0013_set_aside_by_line"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="jobexecution",
            index=models.Index(
                models.F("concurrency_key"),
                models.F("queue_name"),
                models.F("job_type"),
                condition=models.Q(
                    ("concurrency_key__isnull", False), ("set_aside", False), ("status", "PENDING")
                ),
                name="execution_key_lines",
            ),
        ),
        RemoveIndexConcurrently(model_name="jobexecution", name="execution_key_line"),
        migrations.RenameIndex(
            model_name="jobexecution",
            new_name="execution_key_line",
            old_name="execution_key_lines",
        ),
    ]
