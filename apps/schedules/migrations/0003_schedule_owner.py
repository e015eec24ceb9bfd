"""Schedule names are per owner (§17, issue 35): `created_by` becomes `owner` (whoever last
changed what the schedule submits), names are unique per owner and among the ownerless ones,
and `view_all_schedules` goes: operators see and act on every user's schedules with
jobs.view_all_jobs and jobs.operate_all_jobs, as on jobs."""

from django.conf import settings
from django.db import migrations, models


def drop_view_all_schedules(apps, schema_editor):
    # Django creates permissions after migrating but never deletes one: left behind, this one
    # would still be offered in the admin while granting nothing.
    Permission = apps.get_model("auth", "Permission")
    Permission.objects.filter(
        content_type__app_label="jobweaver_schedules", codename="view_all_schedules"
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("jobweaver_schedules", "0002_schedule_source"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="schedule",
            options={"ordering": ["name"]},
        ),
        migrations.RunPython(drop_view_all_schedules, migrations.RunPython.noop),
        migrations.RenameField(
            model_name="schedule",
            old_name="created_by",
            new_name="owner",
        ),
        migrations.AlterField(
            model_name="schedule",
            name="name",
            field=models.SlugField(max_length=100),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.UniqueConstraint(
                condition=models.Q(("owner__isnull", False)),
                fields=("owner", "name"),
                name="jw_schedule_name_per_owner",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.UniqueConstraint(
                condition=models.Q(("owner__isnull", True)),
                fields=("name",),
                name="jw_schedule_name_ownerless",
            ),
        ),
    ]
