"""Autoanalyze tuned for a queue table: the claim's plan is chosen by the statistics of the
last ANALYZE. When that ANALYZE saw (almost) no waiting work, any partial index of PENDING rows
looks as good as the line's, and a plan through one reads and sorts the whole backlog on
every dispatch once a burst has come; a new ANALYZE that sees the backlog replans it. By
default autoanalyze waits for 10% of the table to change, which on a table with history can be
more than any burst: analyze after 1% of it (plus the default 50 rows), and a stale plan
lasts about that many changed rows and an autovacuum naptime (bench/NOTES.md)."""

from django.db import migrations

TABLE = "jobweaver_scheduler_jobexecution"
SETTINGS = "autovacuum_analyze_scale_factor = 0.01"


class Migration(migrations.Migration):
    dependencies = [
        ("jobweaver_scheduler", "0007_live_token_in_flight"),
    ]

    operations = [
        migrations.RunSQL(
            f"ALTER TABLE {TABLE} SET ({SETTINGS})",
            f"ALTER TABLE {TABLE} RESET (autovacuum_analyze_scale_factor)",
        ),
    ]
