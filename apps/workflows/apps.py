from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "jobweaver.workflows"
    label = "jobweaver_workflows"
    default_auto_field = "django.db.models.BigAutoField"
