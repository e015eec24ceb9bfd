"""Concurrency keys per owner (§17, issue 35): a limit is per owner unless global
(`is_global`), and an execution's key is scoped to its job's owner (apps/engine/keys.py):
"<owner id>\\x1f<key>", or "\\x1f<key>" for a job without an owner. The column widens for
the owner's id, and a partial index finds the keyed jobs WAITING (a re-key reads each kind of
unfinished work through one). No limit is global yet, so every stored key takes the owner's
form; backwards, the user's key again."""

from django.db import migrations, models

TABLE = "jobweaver_scheduler_jobexecution"


class Migration(migrations.Migration):
    dependencies = [
        ("jobweaver_scheduler", "0005_execution_waiting"),
    ]

    operations = [
        migrations.AddField(
            model_name="concurrencylimit",
            name="is_global",
            field=models.BooleanField(
                db_default=False,
                default=False,
                help_text="every owner's jobs of a key count as one key (otherwise each "
                "owner's alone)",
                verbose_name="global",
            ),
        ),
        migrations.AlterField(
            model_name="jobexecution",
            name="concurrency_key",
            field=models.CharField(blank=True, max_length=300, null=True),
        ),
        migrations.AddIndex(
            model_name="jobexecution",
            index=models.Index(
                models.F("concurrency_key"),
                condition=models.Q(("concurrency_key__isnull", False), ("status", "WAITING")),
                name="jw_execution_key_waiting",
            ),
        ),
        migrations.RunSQL(
            f"UPDATE {TABLE} SET concurrency_key = "
            "COALESCE(submitted_by_id::text, '') || chr(31) || concurrency_key "
            "WHERE concurrency_key IS NOT NULL AND strpos(concurrency_key, chr(31)) = 0",
            f"UPDATE {TABLE} SET concurrency_key = "
            "substr(concurrency_key, strpos(concurrency_key, chr(31)) + 1) "
            "WHERE strpos(concurrency_key, chr(31)) > 0",
        ),
    ]
