from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "apps.scheduler"
    label = "scheduler"
    default_auto_field = "django.db.models.BigAutoField"
