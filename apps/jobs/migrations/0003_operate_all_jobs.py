# The operator permission operate_all_jobs (ARCHITECTURE §17): acting on every user's jobs.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('jobweaver_jobs', '0002_task_retry_policy'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='job',
            options={'ordering': ['-created_at'], 'permissions': [('view_all_jobs', "Can see every user's jobs"), ('operate_all_jobs', "Can retry, cancel and discard every user's jobs"), ('submit_high_priority', 'Can submit jobs above the priority threshold')]},
        ),
    ]
