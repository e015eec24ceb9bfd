from django.apps import AppConfig
from django.db.models.signals import post_migrate


class SchedulesConfig(AppConfig):
    name = "jobweaver.schedules"
    label = "jobweaver_schedules"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Connecting is all ready() does: the sync itself writes, so it runs after migrate (and
        # when beat or a scheduler worker starts), never while apps load (§13a).
        post_migrate.connect(_sync_code_schedules, sender=self, dispatch_uid="jw-code-schedules")


def _sync_code_schedules(sender, using, **kwargs) -> None:
    from jobweaver.schedules.services import schedules_sync_code

    if using == "default":
        schedules_sync_code()
