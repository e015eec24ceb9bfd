"""The per-user token bucket against the real PostgreSQL: the burst, the refill from the
database's clock, Retry-After, one bucket per user and kind, the exemptions, and exactly the
burst taken when many connections take at once."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from jobweaver.accounts.models import ThrottleBucket
from jobweaver.accounts.tests.helpers import make_user
from jobweaver.accounts.throttle import CANCEL, SUBMIT, throttle_take
from tests.stack import wait_for


@pytest.fixture
def slow_bucket(settings):
    """Five tokens, one more every 100 s: nothing refills during a test."""
    settings.JOBWEAVER_SUBMIT_THROTTLE_BURST = 5
    settings.JOBWEAVER_SUBMIT_THROTTLE_RATE = 1
    settings.JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS = 100


@pytest.mark.django_db
def test_the_burst_is_taken_then_the_wait_is_told(slow_bucket):
    user = make_user("bursty")

    assert [throttle_take(user=user) for _ in range(5)] == [None] * 5
    waits = [throttle_take(user=user) for _ in range(3)]

    assert all(99 <= wait <= 100 for wait in waits), waits  # a refused take spends nothing
    assert ThrottleBucket.objects.get(user=user, kind=SUBMIT).tokens < 1


@pytest.mark.django_db
def test_buckets_are_per_user_and_per_kind(slow_bucket):
    alice, bob = make_user("alice"), make_user("bob")
    for _ in range(5):
        throttle_take(user=alice)

    assert throttle_take(user=alice) is not None
    assert throttle_take(user=alice, kind=CANCEL) is None
    assert throttle_take(user=bob) is None


@pytest.mark.django_db
def test_the_bucket_refills_from_the_database_clock_up_to_the_burst(settings):
    settings.JOBWEAVER_SUBMIT_THROTTLE_BURST = 2
    settings.JOBWEAVER_SUBMIT_THROTTLE_RATE = 20  # 20 a second
    settings.JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS = 1
    user = make_user("refilled")
    while throttle_take(user=user) is None:
        pass

    wait_for(lambda: throttle_take(user=user) is None, timeout=5, message="a token to come back")

    # Left alone, the bucket fills up to the burst, never beyond.
    ThrottleBucket.objects.filter(user=user).update(tokens=0, updated_at="2000-01-01T00:00:00Z")
    assert [throttle_take(user=user) for _ in range(3)][:2] == [None, None]
    assert ThrottleBucket.objects.get(user=user).tokens < 1


@pytest.mark.django_db
def test_operators_and_trusted_callers_are_exempt(settings):
    settings.JOBWEAVER_SUBMIT_THROTTLE_BURST = 1
    operator = make_user("operator", "jobweaver_jobs.operate_all_jobs")
    superuser = make_user("root", is_superuser=True)

    for caller in (operator, superuser, None):
        assert [throttle_take(user=caller) for _ in range(3)] == [None] * 3
    assert not ThrottleBucket.objects.exists()


@pytest.mark.django_db
def test_a_rolled_back_take_gives_the_token_back(settings):
    settings.JOBWEAVER_SUBMIT_THROTTLE_BURST = 1
    settings.JOBWEAVER_SUBMIT_THROTTLE_RATE = 1
    settings.JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS = 100
    user = make_user("undone")

    with pytest.raises(RuntimeError), transaction.atomic():
        assert throttle_take(user=user) is None
        raise RuntimeError("the request failed after taking its token")

    assert throttle_take(user=user) is None


@pytest.mark.django_db(transaction=True)
def test_concurrent_takes_spend_each_token_once(slow_bucket):
    """20 connections take from one bucket of 5 at once: exactly 5 get a token."""
    user = make_user("crowded")  # no bucket yet: one take inserts it, the others update it
    barrier = threading.Barrier(20)
    results: list = []

    def take() -> None:
        try:
            barrier.wait(timeout=30)
            results.append(throttle_take(user=user))
        finally:
            connection.close()

    threads = [threading.Thread(target=take) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert len(results) == 20
    assert results.count(None) == 5
