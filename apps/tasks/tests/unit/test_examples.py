"""The bounded example tasks called in-process (`Task.call`, no worker): spin and fib refuse
what would hold a slot for long, and crash never ends a process that is not a pool child.
Their behaviour on real executors: tests/integration/test_process_pool.py."""

from __future__ import annotations

import pytest

from jobweaver.tasks import NonRetryableError
from jobweaver_site.examples.tasks import crash, fib, spin


def test_fib_is_the_naive_recursion_within_its_bound():
    assert [fib.call(n) for n in (0, 1, 2, 10, 20)] == [0, 1, 1, 55, 6765]
    with pytest.raises(NonRetryableError, match="0 to 35"):
        fib.call(36)


def test_spin_runs_at_most_sixty_seconds():
    assert spin.call(0.01) > 0
    with pytest.raises(NonRetryableError, match="0 to 60"):
        spin.call(61)


def test_crash_outside_a_pool_child_only_raises(monkeypatch):
    monkeypatch.delenv("JOBWEAVER_POOL_CHILD", raising=False)
    with pytest.raises(RuntimeError, match="not in a process-pool child"):
        crash.call()
