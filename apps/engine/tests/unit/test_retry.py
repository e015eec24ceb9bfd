"""The pure retry policy: the seed's delay table, jitter bounds, the cap, non-retryable."""

import random
from datetime import UTC, datetime, timedelta

import pytest

from jobweaver.engine.retry import RetryPolicy, policy_for, retries_on

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_delays_follow_the_seed_table():
    policy = RetryPolicy(base_seconds=5, cap_seconds=300, jitter=0)
    assert [policy.delay_seconds(n) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]


@pytest.mark.parametrize("retry_count", [0, 1, 2, 5, 9])
def test_jitter_stays_within_bounds_and_is_never_early(retry_count):
    policy = RetryPolicy(base_seconds=5, cap_seconds=300, jitter=0.1)
    rng = random.Random(retry_count)
    base_delay = policy.delay_seconds(retry_count + 1)
    delays = [
        policy.decide(
            retry_count=retry_count, max_retries=10, retryable=True, now=NOW, rng=rng
        ).delay_seconds
        for _ in range(500)
    ]
    assert min(delays) >= base_delay
    assert max(delays) <= base_delay * 1.1
    # Jitter is actually applied (not a constant): the draws spread over the interval.
    assert max(delays) - min(delays) > base_delay * 0.05


def test_decision_schedules_the_next_run_and_counts_the_failure():
    policy = RetryPolicy(base_seconds=5, cap_seconds=300, jitter=0)
    decision = policy.decide(retry_count=1, max_retries=3, retryable=True, now=NOW)
    assert decision.retry is True
    assert decision.retry_count == 2
    assert decision.next_run_at == NOW + timedelta(seconds=20)


def test_cap_bounds_delay_including_jitter_base():
    policy = RetryPolicy(base_seconds=5, cap_seconds=300, jitter=0.1)
    decision = policy.decide(retry_count=20, max_retries=30, retryable=True, now=NOW)
    assert 300 <= decision.delay_seconds <= 330


def test_exhausted_retries_dead_letter():
    policy = RetryPolicy()
    decision = policy.decide(retry_count=2, max_retries=2, retryable=True, now=NOW)
    assert decision.retry is False
    assert decision.retry_count == 2
    assert decision.reason == "retries exhausted"


def test_zero_retries_dead_letters_the_first_failure():
    decision = RetryPolicy().decide(retry_count=0, max_retries=0, retryable=True, now=NOW)
    assert decision.retry is False


def test_non_retryable_failure_dead_letters_at_once():
    decision = RetryPolicy().decide(retry_count=0, max_retries=5, retryable=False, now=NOW)
    assert decision.retry is False
    assert decision.reason == "non-retryable"


# --- a task's own policy (ARCHITECTURE §13a) -------------------------------------------------


def test_retry_on_matches_the_raised_exceptions_class_or_a_base_class():
    mro = ("builtins.ConnectionRefusedError", "builtins.ConnectionError", "builtins.OSError")
    assert retries_on(["builtins.ConnectionError"], mro)
    assert not retries_on(["builtins.ValueError"], mro)
    assert retries_on(None, mro)  # no retry_on: every exception


def test_retry_on_does_not_govern_a_failure_that_is_not_the_tasks_exception():
    assert retries_on(["builtins.ConnectionError"], ())  # a lost lease


def test_a_jobs_own_backoff_is_scaled_and_falls_back_to_the_defaults():
    defaults = RetryPolicy(base_seconds=5, cap_seconds=300, jitter=0.1)
    assert policy_for(None, None, defaults=defaults) == defaults
    assert policy_for([1, 60], None, defaults=defaults, scale=0.5) == RetryPolicy(0.5, 30, 0.1)
    assert policy_for(None, 0, defaults=defaults) == RetryPolicy(5, 300, 0)
    decision = policy_for([2, 10], 0, defaults=defaults).decide(
        retry_count=2, max_retries=5, retryable=True, now=NOW
    )
    assert decision.delay_seconds == 10  # min(2 * 2**3, 10)
