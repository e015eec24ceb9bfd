from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobweaver_jobs", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="retry_on",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="retry_backoff",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="retry_jitter",
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="hard_timeout_seconds",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
