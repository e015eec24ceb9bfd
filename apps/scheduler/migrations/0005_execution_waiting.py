# The WAITING status of a workflow's jobs (ARCHITECTURE §16): a choice, no schema change.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobweaver_scheduler', '0004_execution_snooze_count'),
    ]

    operations = [
        migrations.AlterField(
            model_name='jobexecution',
            name='status',
            field=models.CharField(choices=[('WAITING', 'Waiting'), ('PENDING', 'Pending'), ('DISPATCHED', 'Dispatched'), ('RUNNING', 'Running'), ('COMPLETED', 'Completed'), ('FAILED', 'Failed'), ('CANCELLED', 'Cancelled')], default='PENDING', max_length=16),
        ),
    ]
