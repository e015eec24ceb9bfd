from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobweaver_executor", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="executionattempt",
            name="outcome",
            field=models.CharField(
                choices=[
                    ("RUNNING", "Running"),
                    ("SUCCESS", "Success"),
                    ("FAILURE", "Failure"),
                    ("CANCELLED", "Cancelled"),
                    ("LOST", "Lost"),
                    ("SNOOZED", "Snoozed"),
                ],
                default="RUNNING",
                max_length=16,
            ),
        ),
    ]
