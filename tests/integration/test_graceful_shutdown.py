"""SIGTERM of an executor: it stops taking work, lets a short attempt finish within the grace
period, and releases a long one, which runs again at once elsewhere without using a retry."""

from __future__ import annotations

import signal
import time

import pytest
from django.conf import settings

from tests.integration.helpers import (
    assert_invariants,
    attempts_of,
    live_executors,
    running_attempt,
    submit,
    token_client,
    wait_for_status,
    worker_pid,
)
from tests.stack import wait_for

pytestmark = [pytest.mark.integration]

GRACE = settings.JOBWEAVER_SHUTDOWN_GRACE_SECONDS


def test_sigterm_finishes_short_attempts_and_releases_long_ones(stack, live_db):
    live_executors(stack, 2)
    client = token_client()
    long_job = submit(
        client,
        [{"action": "LOG", "message": "go"}, {"action": "SLEEP", "durationMs": 30_000}],
        maxRetryCount=0,
    )
    long_attempt = running_attempt(long_job)
    [victim] = [e for e in stack.executors if e.pid == worker_pid(long_attempt)]

    # A short job on the same worker, still running when SIGTERM arrives.
    short_job = None
    deadline = time.monotonic() + 30
    while short_job is None and time.monotonic() < deadline:
        candidate = submit(
            client, [{"action": "LOG", "message": "go"}, {"action": "SLEEP", "durationMs": 1500}]
        )
        attempt = running_attempt(candidate)
        if worker_pid(attempt) == victim.pid:
            short_job = candidate
    assert short_job is not None, "could not place a short job on the victim executor"

    stopping_at = time.monotonic()
    victim.signal(signal.SIGTERM)
    victim.process.wait(GRACE + 20)
    stopped_after = time.monotonic() - stopping_at
    stack.executors.remove(victim)

    # The short attempt finished on the stopping worker within the grace period.
    assert [a.outcome for a in attempts_of(short_job)] == ["SUCCESS"]
    # The long one was released, not failed: it runs again elsewhere with its budget intact
    # (maxRetryCount 0 would have dead-lettered it had the release counted as a failure).
    wait_for(
        lambda: len(attempts_of(long_job)) == 2,
        timeout=30,
        message="the released job to start again on another worker",
    )
    first, second = attempts_of(long_job)
    assert first.outcome == "LOST" and "released" in first.error_message
    assert worker_pid(second) != victim.pid
    assert stopped_after < GRACE + 10, f"the worker took {stopped_after:.1f} s to stop"
    print(f"SIGTERM: worker stopped after {stopped_after:.1f} s (grace {GRACE} s)")

    from jobweaver.jobs.services import job_cancel

    job_cancel(job_id=long_job)  # no need to sleep 30 s more
    wait_for_status(long_job, "CANCELLED", timeout=10)
    assert_invariants([long_job, short_job])
