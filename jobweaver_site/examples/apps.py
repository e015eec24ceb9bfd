from django.apps import AppConfig


class ExamplesConfig(AppConfig):
    """Example Python tasks (ARCHITECTURE §13), used by the quick start, the docs and the tests."""

    name = "jobweaver_site.examples"
    label = "jobweaver_examples"
    verbose_name = "Example tasks"
