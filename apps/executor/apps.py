from django.apps import AppConfig


class ExecutorConfig(AppConfig):
    name = "apps.executor"
    label = "executor"
    default_auto_field = "django.db.models.BigAutoField"
