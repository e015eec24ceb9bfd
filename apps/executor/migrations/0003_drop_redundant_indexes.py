from django.db import migrations, models

# The unique (job_id, attempt) index serves every lookup of a job's attempts (the job page, the
# cascade when a job is pruned), so the foreign key's own index on job_id only cost an index
# insert per attempt. Only the index goes: the foreign key constraint stays as it is (Django's
# AlterField would drop and re-add it, validating every row of a large table).


class Migration(migrations.Migration):
    dependencies = [
        ("executor", "0002_attempt_task_outcome"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="executionattempt",
                    name="job",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=models.deletion.CASCADE,
                        related_name="attempts",
                        to="jobs.job",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "executor_executionattempt_job_id_4ab27a59"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS '
                    '"executor_executionattempt_job_id_4ab27a59" '
                    'ON "executor_executionattempt" ("job_id")',
                ),
            ],
        ),
    ]
