"""`warm_pool_connections` (jobweaver.core.db): every thread of a pool gets its database
connection before its first task, so a web worker's or an executor's first jobs do not pay for
the connection and the new session's catalog reads."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from jobweaver.accounts.services import api_token_warm_up
from jobweaver.core.db import WARM_UP_RUNS, warm_pool_connections
from jobweaver.jobs.selectors import active_job_count_warm_up
from jobweaver.scheduler.dispatch import warm_up_dispatch

pytestmark = pytest.mark.django_db(transaction=True)  # the pool's threads connect on their own

THREADS = 3


def _on_each_thread(pool: ThreadPoolExecutor, task) -> list:
    """`task()` once on each of the pool's threads (a barrier keeps each call on its own)."""
    together = threading.Barrier(THREADS)

    def call():
        together.wait(timeout=10)
        return task()

    return [future.result(timeout=10) for future in [pool.submit(call) for _ in range(THREADS)]]


def test_each_thread_of_the_pool_has_its_own_open_connection_before_its_first_task():
    pool = ThreadPoolExecutor(max_workers=THREADS)
    try:
        assert warm_pool_connections(pool, THREADS, timeout=10) == []

        def open_session():
            """The backend of the thread's connection, if it was open before this task."""
            if connection.connection is None:
                return None
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                return cursor.fetchone()[0]

        backends = _on_each_thread(pool, open_session)
        assert None not in backends
        assert len(set(backends)) == THREADS
    finally:
        _on_each_thread(pool, lambda: connection.close())  # each thread's own
        pool.shutdown()


def test_a_pool_that_cannot_connect_reports_the_errors_and_serves_anyway():
    pool = ThreadPoolExecutor(max_workers=THREADS)
    original = connection.settings_dict
    try:

        def unreachable():
            connection.close()
            # A copy for this thread's connection only: the dict itself is every thread's.
            connection.settings_dict = {**original, "PORT": "1"}

        _on_each_thread(pool, unreachable)
        errors = warm_pool_connections(pool, THREADS, timeout=10)

        assert len(errors) == THREADS
        assert pool.submit(lambda: "served").result(timeout=10) == "served"
    finally:

        def restore():
            connection.settings_dict = original
            connection.close()

        _on_each_thread(pool, restore)
        pool.shutdown()


def _prepared(statement_part: str):
    """(generic plans, custom plans) of this connection's prepared statement containing
    `statement_part`, or None when it is not prepared."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE %s",
            [f"%{statement_part}%"],
        )
        return cursor.fetchone()


def test_a_warmed_connection_has_the_hot_statements_prepared_and_past_their_first_plans():
    """What a web worker runs on each request thread's connection before its first request:
    the token look-up, the cap's count and the submit's claim, each run WARM_UP_RUNS times,
    so a request's run of them is prepared and may use its generic plan."""
    pool = ThreadPoolExecutor(max_workers=1)
    statements = (api_token_warm_up, active_job_count_warm_up, warm_up_dispatch)
    try:
        assert warm_pool_connections(pool, 1, timeout=10, statements=statements) == []
        plans = pool.submit(
            lambda: [_prepared(part) for part in ("key_hash", "count(*)", "WITH due AS")]
        ).result(timeout=10)
        for generic, custom in plans:  # a run unprepared, then prepared ones
            assert generic + custom == WARM_UP_RUNS - 1
    finally:
        pool.submit(lambda: connection.close()).result(timeout=10)
        pool.shutdown()
