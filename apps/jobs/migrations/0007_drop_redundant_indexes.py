from django.db import migrations, models

# trace_id is only ever matched exactly (the API's filter, the admin's search), so the
# varchar_pattern_ops copy that `db_index=True` adds to a CharField serves no query and costs an
# index insert per job. The plain btree stays, under the same name, now declared in Meta: the
# database only loses the copy (no index is rebuilt on a large table).


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0006_concurrency_key"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="job",
                    name="trace_id",
                    field=models.CharField(max_length=64),
                ),
                migrations.AddIndex(
                    model_name="job",
                    index=models.Index(fields=["trace_id"], name="jobs_job_trace_id_852c27c3"),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "jobs_job_trace_id_852c27c3_like"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "jobs_job_trace_id_852c27c3_like" '
                    'ON "jobs_job" ("trace_id" varchar_pattern_ops)',
                ),
            ],
        ),
    ]
