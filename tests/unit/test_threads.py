"""`on_each_thread` (jobweaver.core.threads): a call runs once on each thread of a pool."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from jobweaver.core.threads import on_each_thread

THREADS = 6


def test_the_call_runs_once_on_each_thread_of_the_pool():
    ran_on: list[int] = []
    lock = threading.Lock()

    def record() -> None:
        with lock:
            ran_on.append(threading.get_ident())

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        assert on_each_thread(pool, THREADS, record, timeout=10) == []
    assert len(ran_on) == THREADS
    assert len(set(ran_on)) == THREADS  # no thread took two runs


def test_the_errors_of_the_runs_are_returned_not_raised():
    def fail() -> None:
        raise RuntimeError("the database is away")

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        errors = on_each_thread(pool, THREADS, fail, timeout=10)
    assert [str(error) for error in errors] == ["the database is away"] * THREADS
