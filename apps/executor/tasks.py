"""The executor's Celery task. Thin: ids in, one service call. Running it twice is harmless
because the service fences on the event id."""

import uuid

from celery import shared_task

from apps.executor.services import attempt_execute


@shared_task(name="apps.executor.tasks.run_job")
def run_job(job_id: str, event_id: str) -> str | None:
    return attempt_execute(job_id=uuid.UUID(job_id), event_id=uuid.UUID(event_id))
