# Workflows (ARCHITECTURE §16): a workflow, its jobs' nodes, its edges.

import django.db.models.deletion
import django.db.models.functions.datetime
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('jobweaver_jobs', '0002_task_retry_policy'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Workflow',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('name', models.CharField(max_length=200)),
                ('status', models.CharField(choices=[('RUNNING', 'Running'), ('COMPLETED', 'Completed'), ('FAILED', 'Failed'), ('CANCELLED', 'Cancelled')], default='RUNNING', max_length=16)),
                ('trace_id', models.CharField(blank=True, default='', max_length=64)),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('unfinished', models.PositiveIntegerField()),
                ('failed', models.PositiveIntegerField(default=0)),
                ('cancelled', models.BooleanField(default=False)),
                ('version', models.PositiveIntegerField(default=0)),
                ('submitted_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
        ),
        migrations.CreateModel(
            name='Node',
            fields=[
                ('job', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='workflow_node', serialize=False, to='jobweaver_jobs.job')),
                ('ref', models.CharField(max_length=64)),
                ('position', models.PositiveIntegerField(default=0)),
                ('ignore_failed_dependencies', models.BooleanField(default=False)),
                ('parent_results_as', models.CharField(blank=True, default='', max_length=8)),
                ('waiting_on', models.PositiveIntegerField(default=0)),
                ('cancelled_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='jobweaver_jobs.job')),
                ('workflow', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='nodes', to='jobweaver_workflows.workflow')),
            ],
        ),
        migrations.CreateModel(
            name='Dependency',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('depends_on', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='jobweaver_jobs.job')),
                ('job', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='jobweaver_jobs.job')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('job', 'depends_on'), name='jw_dependency_unique')],
            },
        ),
        migrations.AddIndex(
            model_name='workflow',
            index=models.Index(fields=['submitted_by', '-created_at'], name='jw_workflow_by_owner'),
        ),
        migrations.AddIndex(
            model_name='workflow',
            index=models.Index(fields=['status', '-created_at'], name='jw_workflow_by_status'),
        ),
        migrations.AddIndex(
            model_name='node',
            index=models.Index(condition=models.Q(('cancelled_by__isnull', False)), fields=['cancelled_by'], name='jw_node_cancelled_by'),
        ),
        migrations.AddConstraint(
            model_name='node',
            constraint=models.UniqueConstraint(fields=('workflow', 'ref'), name='jw_node_ref_unique'),
        ),
    ]
