"""Autovacuum tuned for a queue table: every transition writes a new row version of its
execution, and the partial status indexes the dispatcher and flow control scan fill with dead
entries between vacuums. Vacuum it after 2% of its rows changed (not 20%), without cost
delays. The same for the outbox, which gets a row per event and one update per publish."""

from django.db import migrations

TABLES = ("jobweaver_scheduler_jobexecution", "jobweaver_outbox_outboxevent")
SETTINGS = "autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_cost_delay = 0"


class Migration(migrations.Migration):
    dependencies = [
        ("jobweaver_scheduler", "0001_initial"),
        ("jobweaver_outbox", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(
            [f"ALTER TABLE {table} SET ({SETTINGS})" for table in TABLES],
            [
                f"ALTER TABLE {table} RESET "
                "(autovacuum_vacuum_scale_factor, autovacuum_vacuum_cost_delay)"
                for table in TABLES
            ],
        ),
    ]
