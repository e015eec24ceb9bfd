"""The retry policy (ARCHITECTURE §5, §13a): pure, ORM-free, unit-tested without a database.

`maxRetryCount` counts retries after the first attempt. After failure number n (the retry
count after incrementing) the next attempt waits `min(base * 2**n, cap)` seconds plus a jitter
drawn from `U(0, jitter * delay)`, so a retry is never earlier than the seed's schedule.

A TASK job may carry its own: `retry_on` (the exception class paths that are retried, matched
against the raised exception's MRO; any other exception dead-letters at once) and its own
backoff and jitter, scaled by JOBWEAVER_BACKOFF_SCALE (`policy_for`, `retries_on`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class RetryPolicy:
    base_seconds: float = 5.0
    cap_seconds: float = 300.0
    jitter: float = 0.1

    def delay_seconds(self, failure_number: int) -> float:
        """The seed's delay before the retry that follows failure `failure_number` (1-based)."""
        return min(self.base_seconds * 2**failure_number, self.cap_seconds)

    def decide(
        self,
        *,
        retry_count: int,
        max_retries: int,
        retryable: bool,
        now: datetime,
        rng: random.Random | None = None,
    ) -> RetryDecision:
        """What to do after a failed attempt, given the retries used so far (before this one)."""
        if not retryable:
            return RetryDecision(retry=False, retry_count=retry_count, reason="non-retryable")
        if retry_count >= max_retries:
            return RetryDecision(retry=False, retry_count=retry_count, reason="retries exhausted")
        failure_number = retry_count + 1
        delay = self.delay_seconds(failure_number)
        jitter = (rng or random).uniform(0, self.jitter * delay) if self.jitter > 0 else 0.0
        return RetryDecision(
            retry=True,
            retry_count=failure_number,
            delay_seconds=delay + jitter,
            next_run_at=now + timedelta(seconds=delay + jitter),
            reason="retry scheduled",
        )


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    retry_count: int
    reason: str
    delay_seconds: float = 0.0
    next_run_at: datetime | None = None


def retries_on(retry_on, exception_mro) -> bool:
    """Whether a failure may be retried under a task's `retry_on` (class paths; None: every
    exception). `exception_mro` is the raised exception's class paths, most specific first;
    empty for a failure that is not the task's exception (a lost lease), which `retry_on`
    does not govern."""
    if retry_on is None or not exception_mro:
        return True
    return not set(retry_on).isdisjoint(exception_mro)


def policy_for(
    backoff, jitter: float | None, *, defaults: RetryPolicy, scale: float = 1.0
) -> RetryPolicy:
    """A job's own policy: its backoff's (base, cap) seconds times `scale` and its jitter,
    each falling back to `defaults` (the settings') where the job has none."""
    policy = defaults
    if backoff is not None:
        base, cap = backoff
        policy = RetryPolicy(base * scale, cap * scale, policy.jitter)
    if jitter is not None:
        policy = RetryPolicy(policy.base_seconds, policy.cap_seconds, jitter)
    return policy


def policy_from_settings() -> RetryPolicy:
    from jobweaver.conf import settings

    return RetryPolicy(
        base_seconds=settings.JOBWEAVER_BACKOFF_BASE_SECONDS,
        cap_seconds=settings.JOBWEAVER_BACKOFF_CAP_SECONDS,
        jitter=settings.JOBWEAVER_BACKOFF_JITTER,
    )
