from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobweaver.jobs"
    label = "jobweaver_jobs"
    default_auto_field = "django.db.models.BigAutoField"
