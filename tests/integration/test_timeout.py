"""timeoutSeconds on real workers: an attempt that runs longer fails with a clear "timed out"
error, and the failure follows the retry policy like any other."""

from __future__ import annotations

import pytest

from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.models import JobExecution
from tests.integration.helpers import (
    assert_invariants,
    attempts_of,
    submit,
    token_client,
    wait_for_status,
)

pytestmark = [pytest.mark.integration]

TIMED_OUT = "timed out after 1 s (timeoutSeconds)"


@pytest.mark.parametrize("max_retries", [0, 1])
def test_an_attempt_longer_than_its_timeout_fails_and_follows_the_retry_policy(
    stack, live_db, max_retries
):
    job_id = submit(
        token_client(),
        [{"action": "SLEEP", "durationMs": 5000}],
        timeoutSeconds=1,
        maxRetryCount=max_retries,
    )

    wait_for_status(job_id, "FAILED", timeout=30)

    attempts = attempts_of(job_id)
    assert [(a.outcome, a.error_message) for a in attempts] == [("FAILURE", TIMED_OUT)] * (
        max_retries + 1
    )
    for attempt in attempts:  # stopped at the timeout, long before the 5 s sleep would end
        assert 1.0 <= (attempt.finished_at - attempt.started_at).total_seconds() < 3.0
    execution = JobExecution.objects.get(job_id=job_id)
    assert (execution.last_error, execution.retry_count) == (TIMED_OUT, max_retries)
    [dead_letter] = OutboxEvent.objects.filter(topic="job-dead-letter", key=job_id)
    assert dead_letter.payload["reason"] == f"retries exhausted: {TIMED_OUT}"
    assert_invariants([job_id])
