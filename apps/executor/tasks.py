"""The executor's Celery task. Thin: ids in, one service call. Running it twice is harmless
because the service fences on the event id."""

import uuid

from celery import shared_task
from celery.exceptions import Reject
from celery.signals import worker_shutting_down
from django.conf import settings

from apps.core.db import DATABASE_UNAVAILABLE
from apps.executor import shutdown
from apps.executor.runner import attempt_execute


@shared_task(name="apps.executor.tasks.run_job")
def run_job(job_id: str, event_id: str) -> str | None:
    try:
        return attempt_execute(job_id=uuid.UUID(job_id), event_id=uuid.UUID(event_id))
    except DATABASE_UNAVAILABLE as exc:
        # PostgreSQL stayed away longer than the service's retries: put the message back on
        # its topic rather than acknowledge a delivery that was never claimed.
        raise Reject(exc, requeue=True) from exc


@worker_shutting_down.connect
def start_shutdown_grace(**kwargs) -> None:
    """SIGTERM: attempts still running after the grace period are released (shutdown.py)."""
    shutdown.begin(settings.JOBWEAVER_SHUTDOWN_GRACE_SECONDS)
