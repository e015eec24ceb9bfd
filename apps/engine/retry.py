"""The retry policy (ARCHITECTURE §5): pure, ORM-free, unit-tested without a database.

`maxRetryCount` counts retries after the first attempt. After failure number n (the retry
count after incrementing) the next attempt waits `min(base * 2**n, cap)` seconds plus a jitter
drawn from `U(0, jitter * delay)`, so a retry is never earlier than the seed's schedule.
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


def policy_from_settings() -> RetryPolicy:
    from jobweaver.conf import settings

    return RetryPolicy(
        base_seconds=settings.JOBWEAVER_BACKOFF_BASE_SECONDS,
        cap_seconds=settings.JOBWEAVER_BACKOFF_CAP_SECONDS,
        jitter=settings.JOBWEAVER_BACKOFF_JITTER,
    )
