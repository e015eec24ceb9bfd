"""The claim reads only the line (jw_execution_due_work): the two other partial indexes of
PENDING rows get a predicate the claim never implies. A plan may read any index whose
predicate its conditions imply, and with statistics that saw no waiting work (an ANALYZE
before a burst) the claim read jw_execution_pending_by_user, or jw_execution_pending_due, whole
and sorted it: the whole backlog, on every dispatch (bench/NOTES.md). The per-user count says
whose rows it counts, and the due-time readers say `priority >= 0` (models.PENDING_DUE_ROWS);
the claim says neither. The same for the re-key's reads of keyed work that waits
(apps/engine/store/keys.py), which read the keyed history through jw_execution_key_dispatched:
that index now holds only rows that were dispatched, as the rate's window it serves says."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobweaver_scheduler", "0008_queue_table_analyze"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="jobexecution", name="jw_execution_pending_due"),
        migrations.RemoveIndex(model_name="jobexecution", name="jw_execution_pending_by_user"),
        migrations.AddIndex(
            model_name="jobexecution",
            index=models.Index(
                models.F("next_run_at"),
                condition=models.Q(("priority__gte", 0), ("status", "PENDING")),
                name="jw_execution_pending_due",
            ),
        ),
        migrations.AddIndex(
            model_name="jobexecution",
            index=models.Index(
                models.F("submitted_by"),
                condition=models.Q(("status", "PENDING"), ("submitted_by__isnull", False)),
                name="jw_execution_pending_by_user",
            ),
        ),
        migrations.RemoveIndex(model_name="jobexecution", name="jw_execution_key_dispatched"),
        migrations.AddIndex(
            model_name="jobexecution",
            index=models.Index(
                models.F("dispatched_at"),
                models.F("concurrency_key"),
                condition=models.Q(
                    ("concurrency_key__isnull", False), ("dispatched_at__isnull", False)
                ),
                name="jw_execution_key_dispatched",
            ),
        ),
    ]
