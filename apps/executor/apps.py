from django.apps import AppConfig


class ExecutorConfig(AppConfig):
    name = "jobweaver.executor"
    label = "jobweaver_executor"
    default_auto_field = "django.db.models.BigAutoField"
