"""A DISPATCHED execution an executor has accepted (issue 34): the executor runs a short attempt
before its start is written, so no other executor may start the delivery meanwhile. A column
outside every index, so the accept's write stays a HOT update."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobweaver_scheduler", "0009_claim_reads_only_the_line"),
    ]

    operations = [
        migrations.AddField(
            model_name="jobexecution",
            name="accepted",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
