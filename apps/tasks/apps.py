from django.apps import AppConfig

from jobweaver.jobs.python_tasks.registry import registry_build


class TasksConfig(AppConfig):
    """JobWeaver as a backend of Django's Tasks framework (ARCHITECTURE §13)."""

    name = "jobweaver.tasks"
    label = "jobweaver_tasks"  # "tasks" would read like the framework's own app
    verbose_name = "Python tasks"

    def ready(self) -> None:
        # Every app's models are loaded by now, so tasks modules may import them freely.
        registry_build()
