from django.apps import AppConfig


class SchedulesConfig(AppConfig):
    name = "jobweaver.schedules"
    label = "jobweaver_schedules"
    default_auto_field = "django.db.models.BigAutoField"
