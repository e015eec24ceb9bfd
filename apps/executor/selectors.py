from __future__ import annotations

import uuid
from datetime import datetime

from django.db.models import Count, Q

from apps.executor.models import AttemptOutcome, ExecutionAttempt


def attempts_for_jobs(*, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[ExecutionAttempt]]:
    """Attempts of each job, oldest first (one query for a whole page)."""
    grouped: dict[uuid.UUID, list[ExecutionAttempt]] = {job_id: [] for job_id in job_ids}
    for attempt in ExecutionAttempt.objects.filter(job_id__in=job_ids).order_by(
        "job_id", "attempt"
    ):
        grouped[attempt.job_id].append(attempt)
    return grouped


def attempts_finished_since(*, job_ids, since: datetime) -> dict[str, int]:
    """How many attempts of these jobs (ids or a subquery) finished since `since`, and how many
    of those failed (FAILURE or LOST)."""
    return ExecutionAttempt.objects.filter(job_id__in=job_ids, finished_at__gte=since).aggregate(
        finished=Count("event_id"),
        failed=Count(
            "event_id", filter=Q(outcome__in=[AttemptOutcome.FAILURE, AttemptOutcome.LOST])
        ),
    )
