"""The beat schedule, stored in django-celery-beat's tables so operators see it in the admin."""

from __future__ import annotations

from django.db import transaction
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from jobweaver.conf import settings
from jobweaver.core.kafka import SCHEDULER, topic_name


# name -> (task, interval seconds)
def schedule_entries() -> dict[str, tuple[str, float]]:
    return {
        "jobweaver: dispatch due jobs": (
            "jobweaver.scheduler.tasks.dispatch_due_jobs",
            settings.JOBWEAVER_DISPATCH_INTERVAL_SECONDS,
        ),
        "jobweaver: rescue expired leases": (
            "jobweaver.scheduler.tasks.rescue_expired_leases",
            settings.JOBWEAVER_RESCUE_INTERVAL_SECONDS,
        ),
        "jobweaver: relay outbox": (
            "jobweaver.outbox.tasks.relay_outbox",
            settings.JOBWEAVER_OUTBOX_RELAY_INTERVAL_SECONDS,
        ),
        "jobweaver: prune finished work": (
            "jobweaver.scheduler.tasks.prune_finished_work",
            settings.JOBWEAVER_PRUNE_INTERVAL_SECONDS,
        ),
        "jobweaver: fire schedules": (
            "jobweaver.schedules.tasks.fire_schedules",
            settings.JOBWEAVER_SCHEDULES_INTERVAL_SECONDS,
        ),
    }


def _interval(seconds: float) -> IntervalSchedule:
    # Whole seconds read best in the admin; fractions (tests shrink time) use microseconds.
    if float(seconds).is_integer():
        every, period = int(seconds), IntervalSchedule.SECONDS
    else:
        every, period = round(seconds * 1_000_000), IntervalSchedule.MICROSECONDS
    schedule, _ = IntervalSchedule.objects.get_or_create(every=every, period=period)
    return schedule


@transaction.atomic
def beat_schedule_setup() -> list[str]:
    """Create or update the project's periodic tasks (idempotent); returns their names."""
    for name, (task, seconds) in schedule_entries().items():
        PeriodicTask.objects.update_or_create(
            name=name,
            defaults={
                "task": task,
                "interval": _interval(seconds),
                "crontab": None,
                "queue": topic_name(SCHEDULER),
                "routing_key": topic_name(SCHEDULER),
                "enabled": True,
                # A tick that could not be sent in time is worthless: the next one does the work.
                "expire_seconds": None,
            },
        )
    return list(schedule_entries())
