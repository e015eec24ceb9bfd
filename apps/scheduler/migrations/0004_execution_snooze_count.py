from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobweaver_scheduler", "0003_queue_settings"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobexecution",
            name="snooze_count",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
    ]
