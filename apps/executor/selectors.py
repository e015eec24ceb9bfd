from __future__ import annotations

import uuid

from apps.executor.models import ExecutionAttempt


def attempts_for_jobs(*, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[ExecutionAttempt]]:
    """Attempts of each job, oldest first (one query for a whole page)."""
    grouped: dict[uuid.UUID, list[ExecutionAttempt]] = {job_id: [] for job_id in job_ids}
    for attempt in ExecutionAttempt.objects.filter(job_id__in=job_ids).order_by(
        "job_id", "attempt"
    ):
        grouped[attempt.job_id].append(attempt)
    return grouped
