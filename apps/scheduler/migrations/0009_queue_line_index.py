"""The waiting line queue by queue: while a queue is paused the claim reads the open queues'
lines and never the paused one's (apps/scheduler/lifecycle._due_per_open_queue)."""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # Built without blocking writes on a live executions table.
    atomic = False

    dependencies = [
        ("scheduler", "0008_execution_submitted_by"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="jobexecution",
            index=models.Index(
                models.F("queue_name"),
                models.OrderBy(models.F("priority"), descending=True),
                models.F("next_run_at"),
                condition=models.Q(("status", "PENDING")),
                name="execution_queue_line",
            ),
        ),
    ]
