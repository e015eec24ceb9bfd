import logging
import os

from django.apps import AppConfig
from django.db.models.signals import post_migrate

logger = logging.getLogger(__name__)


class SchedulesConfig(AppConfig):
    name = "jobweaver.schedules"
    label = "jobweaver_schedules"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Connecting is all ready() does: the sync writes, so it runs after migrate and when
        # beat or a scheduler worker starts, never while apps load (§13a).
        from celery import signals

        post_migrate.connect(_after_migrate, sender=self, dispatch_uid="jw-code-schedules")
        signals.beat_init.connect(_at_worker_start, weak=False, dispatch_uid="jw-code-beat")
        signals.worker_ready.connect(_at_worker_start, weak=False, dispatch_uid="jw-code-worker")


def _after_migrate(sender, using, **kwargs) -> None:
    from jobweaver.schedules.services import schedules_sync_code

    if using == "default":
        schedules_sync_code()


def _at_worker_start(**kwargs) -> None:
    """Beat, or the scheduler worker (an executor has no say in schedules): the code's
    schedules as this release declares them. A failure is logged, never fatal: the schedules
    as they were keep firing."""
    if os.environ.get("JOBWEAVER_WORKER_ROLE") == "executor":
        return
    from jobweaver.schedules.services import schedules_sync_code

    try:
        schedules_sync_code()
    except Exception:
        logger.exception("code schedules not synced")
