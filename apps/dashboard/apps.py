from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The operator's cockpit: the live dashboard, the dead-letter desk and bulk job actions."""

    name = "jobweaver.dashboard"
    label = "jobweaver_dashboard"
    verbose_name = "Operations"
    default_auto_field = "django.db.models.BigAutoField"
