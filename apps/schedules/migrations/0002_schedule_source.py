from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobweaver_schedules", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="schedule",
            name="source",
            field=models.CharField(
                choices=[
                    ("api", "Made through the API, the CLI or the admin"),
                    ("code", "Declared in code with @periodic (read-only elsewhere)"),
                ],
                default="api",
                max_length=8,
            ),
        ),
    ]
