from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "jobweaver.scheduler"
    label = "jobweaver_scheduler"
    default_auto_field = "django.db.models.BigAutoField"
