"""Another database session, for tests that need concurrent work in slow motion."""

from __future__ import annotations

import contextlib

import psycopg
from django.db import connection


@contextlib.contextmanager
def held_by_another_session(statement: str, params: list, *, settings: list[str]):
    """Another session runs `statement` (taking a lock it then holds) while this test's
    connection, the one the test client's requests use, runs with `settings` (`SET …`); the
    lock goes and the timeouts are reset at the end."""
    with psycopg.connect(**connection.get_connection_params()) as other:
        other.execute(statement, params)
        with connection.cursor() as cursor:
            for setting in settings:
                cursor.execute(f"SET {setting}")
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
                cursor.execute("RESET statement_timeout")
