"""How many freed credits the dispatcher's wake-up waits for before it dispatches (issue 34):
half the live executors' window, so they still hold the other half meanwhile."""

from __future__ import annotations

from django.test import override_settings

from jobweaver.scheduler.wakeup import fold_credits


def test_half_the_window():
    assert fold_credits(8) == 4  # one executor at the defaults: 4 slots x prefetch 2
    assert fold_credits(9) == 4


def test_a_small_executor_never_waits_on_the_fold():
    assert fold_credits(2) == 1  # one slot, prefetch 2: the first freed credit dispatches
    assert fold_credits(1) == 1
    assert fold_credits(0) == 1  # no live executor read yet: any notification dispatches


@override_settings(JOBWEAVER_DISPATCH_BATCH_SIZE=50)
def test_never_more_than_a_dispatch_batch():
    assert fold_credits(400) == 50
