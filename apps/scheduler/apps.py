from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "jobweaver.scheduler"
    label = "jobweaver_scheduler"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers JobWeaver's system checks (`manage.py check`).
        from jobweaver.scheduler import checks  # noqa: F401
