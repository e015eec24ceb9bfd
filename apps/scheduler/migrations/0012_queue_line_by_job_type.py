"""The claim's line per queue and job type: a paused job type's backlog is no longer read by
every claim.

While anything is paused the claim reads the waiting work line by line and never reads a paused
line (lifecycle._due_per_open_line). The lines were queues only, so a paused job type's work
was filtered out of its queue's line row by row: with 50,000 of it ahead of the open work, 9.8
ms a dispatch, and 28 ms with a queue paused as well (bench/dispatch_rules.py). The line index
gains the job type after the queue. As in 0011 it is built under a temporary name first and
renamed once the old one is gone, so the claim always has a line to read; concurrently, so
submissions and dispatches go on while it is built.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("scheduler", "0011_set_aside"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="jobexecution",
            index=models.Index(
                models.F("queue_name"),
                models.F("job_type"),
                models.OrderBy(models.F("priority"), descending=True),
                models.F("next_run_at"),
                condition=models.Q(("set_aside", False), ("status", "PENDING")),
                name="execution_type_line",
            ),
        ),
        RemoveIndexConcurrently(model_name="jobexecution", name="execution_queue_line"),
        migrations.RenameIndex(
            model_name="jobexecution",
            new_name="execution_queue_line",
            old_name="execution_type_line",
        ),
    ]
