"""The deliveries a slot an executor asks for (issue 34, apps/executor/window.py): NULL, as
every executor of an earlier version reports, means JOBWEAVER_DISPATCH_PREFETCH."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobweaver_scheduler", "0010_execution_accepted"),
    ]

    operations = [
        migrations.AddField(
            model_name="executorregistration",
            name="prefetch",
            field=models.PositiveSmallIntegerField(blank=True, null=True),
        ),
    ]
