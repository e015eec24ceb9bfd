"""Set-aside work per key, queue and job type: a pause no longer costs every dispatch a read of
a limited key's backlog.

A key at its limit had its waiting work in a paused queue left in line, and the set-aside scan
read past all of it on every dispatch (9.7 ms with 50,000, bench/dispatch_rules.py); work set
aside before its queue was paused was read by every put-back while the key had room (10.9 ms).
Now the set-aside scan takes a blocked key's work wherever it waits, and the put-back reads a
key's set-aside work per queue and job type, skipping the paused ones (lifecycle.
executions_put_back). The set-aside index gains the queue and the job type after the key. As
in 0011 it is built concurrently under a temporary name, the old one dropped, then renamed.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("scheduler", "0012_queue_line_by_job_type"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="jobexecution",
            index=models.Index(
                models.F("concurrency_key"),
                models.F("queue_name"),
                models.F("job_type"),
                models.OrderBy(models.F("priority"), descending=True),
                models.F("next_run_at"),
                condition=models.Q(("set_aside", True), ("status", "PENDING")),
                name="execution_aside_lines",
            ),
        ),
        RemoveIndexConcurrently(model_name="jobexecution", name="execution_set_aside"),
        migrations.RenameIndex(
            model_name="jobexecution",
            new_name="execution_set_aside",
            old_name="execution_aside_lines",
        ),
    ]
