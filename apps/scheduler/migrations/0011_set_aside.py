"""Set-aside waiting work: a key at its limit no longer costs every claim a read of its backlog.

The claim reads the waiting line best first and skipped a key at its limit row by row: with
one key's 50,000 waiting ahead of the open work, every dispatch read all of them (9.7 ms,
bench/dispatch_rules.py). Now a dispatch sets such rows aside (`set_aside`, still PENDING, in
their place in line) and puts a key's best rows back when it has room (apps/scheduler/limits.py,
lifecycle.executions_set_aside and executions_put_back). The claim's two lines leave set-aside
rows out, so they are rebuilt with that condition: built under a temporary name first and
renamed once the old one is gone, so the claim always has a line to read. Every index is built
concurrently; the new column has a constant default, so adding it rewrites nothing.
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models

WAITING_IN_LINE = models.Q(("set_aside", False), ("status", "PENDING"))
BEST_FIRST = (models.OrderBy(models.F("priority"), descending=True), models.F("next_run_at"))


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("scheduler", "0010_backfill_submitted_by_again"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobexecution",
            name="set_aside",
            field=models.BooleanField(db_default=False, default=False),
        ),
        AddIndexConcurrently(
            model_name="jobexecution",
            index=models.Index(*BEST_FIRST, condition=WAITING_IN_LINE, name="execution_due_line"),
        ),
        RemoveIndexConcurrently(model_name="jobexecution", name="execution_due_work"),
        migrations.RenameIndex(
            model_name="jobexecution", new_name="execution_due_work", old_name="execution_due_line"
        ),
        AddIndexConcurrently(
            model_name="jobexecution",
            index=models.Index(
                models.F("queue_name"),
                *BEST_FIRST,
                condition=WAITING_IN_LINE,
                name="execution_queue_open",
            ),
        ),
        RemoveIndexConcurrently(model_name="jobexecution", name="execution_queue_line"),
        migrations.RenameIndex(
            model_name="jobexecution",
            new_name="execution_queue_line",
            old_name="execution_queue_open",
        ),
        AddIndexConcurrently(
            model_name="jobexecution",
            index=models.Index(
                models.F("concurrency_key"),
                condition=models.Q(
                    ("concurrency_key__isnull", False), ("set_aside", False), ("status", "PENDING")
                ),
                name="execution_key_line",
            ),
        ),
        AddIndexConcurrently(
            model_name="jobexecution",
            index=models.Index(
                models.F("concurrency_key"),
                *BEST_FIRST,
                condition=models.Q(("set_aside", True), ("status", "PENDING")),
                name="execution_set_aside",
            ),
        ),
    ]
