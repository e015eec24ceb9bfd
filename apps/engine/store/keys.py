"""Concurrency keys per owner (apps/engine/keys.py): the lock that keeps a submit's reading of
the limits and a limit's change apart, the limits a submit scopes its keys by, and the re-key
of executions when a limit's scope changes what their key shares."""

from __future__ import annotations

import uuid

from django.db import connection

from jobweaver.engine.store import named
from jobweaver.scheduler.models import (
    TERMINAL_STATUSES,
    ConcurrencyLimit,
    ExecutionStatus,
    JobExecution,
    status_literal,
)

# pg_advisory_xact_lock(namespace, 0): taken shared by a submit with a concurrency key before
# it reads the limits, exclusively by a change of the limits before it re-keys. Submits never
# wait for each other; a change waits for the submits reading the old limits to commit, and
# a submit after it reads the new ones.
KEY_SCOPE_LOCK_NAMESPACE = 0x4A59
_UNFINISHED = ", ".join(
    status_literal(status) for status in ExecutionStatus if status not in TERMINAL_STATUSES
)
# The user's key of an execution's scoped key (all after the first separator, chr(31)).
_USER_KEY = "substr(concurrency_key, strpos(concurrency_key, chr(31)) + 1)"


@named("pg_advisory_xact_lock(_shared) the key scopes: shared by a submit, exclusive by a change")
def key_scopes_lock(*, exclusive: bool) -> None:
    function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(%s, 0)", [KEY_SCOPE_LOCK_NAMESPACE])


@named("SELECT the limits' (pattern, is_global) when any limit is global, else no rows")
def limit_scopes() -> list[tuple[str, bool]]:
    """Without a global limit every key is its owner's, whatever the other limits: the
    common case reads the small table of limits and gets nothing back."""
    table = ConcurrencyLimit._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT pattern, is_global FROM {table} "
            f"WHERE EXISTS (SELECT 1 FROM {table} WHERE is_global)"
        )
        return cursor.fetchall()


# The unfinished executions with a key, one branch per partial index that holds them
# (jw_execution_key_line, jw_execution_set_aside, jw_execution_key_in_flight,
# jw_execution_key_waiting): a re-key reads the work that waits or runs, never the history.
_UNFINISHED_KEYED = tuple(
    f"{condition} AND concurrency_key IS NOT NULL"
    for condition in (
        f"status = {status_literal(ExecutionStatus.PENDING)} AND NOT set_aside",
        f"status = {status_literal(ExecutionStatus.PENDING)} AND set_aside",
        f"status IN ({status_literal(ExecutionStatus.DISPATCHED)}, "
        f"{status_literal(ExecutionStatus.RUNNING)})",
        f"status = {status_literal(ExecutionStatus.WAITING)}",
    )
)


@named("UPDATE the scoped keys of unfinished executions (by user key LIKE, or job ids) to fit")
def executions_rekey(
    *,
    patterns: list[str],
    precedences: list[int],
    global_flags: list[bool],
    user_like: str | None = None,
    job_ids: list[uuid.UUID] | None = None,
) -> list[tuple[uuid.UUID, str]]:
    """Give each unfinished (WAITING, PENDING, set aside or not, DISPATCHED, RUNNING)
    execution with a key the form its limits decide: shared ("\\x1f" + the user's key) when
    the limit of the highest precedence whose LIKE `patterns` match the user's key is global,
    or it has no owner; its owner's otherwise. Only the executions whose user's key matches
    the LIKE `user_like`, or those of `job_ids`. Returns (job id, new key) of those changed."""
    assert (user_like is None) != (job_ids is None), "by a pattern or by jobs"
    table = JobExecution._meta.db_table
    columns = f"id, submitted_by_id, {_USER_KEY} AS user_key"
    if user_like is not None:
        keyed = " UNION ALL ".join(
            f"SELECT {columns} FROM {table} WHERE {branch} AND {_USER_KEY} LIKE %(like)s"
            for branch in _UNFINISHED_KEYED
        )
    else:
        keyed = (
            f"SELECT {columns} FROM {table} WHERE job_id = ANY(%(jobs)s) "
            f"AND status IN ({_UNFINISHED}) AND concurrency_key IS NOT NULL"
        )
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH keyed AS ({keyed}),
            fitting AS (
                SELECT keyed.id, CASE
                    WHEN keyed.submitted_by_id IS NULL OR COALESCE((
                        SELECT l.is_global
                        FROM unnest(%(patterns)s::text[], %(precedences)s::int[],
                            %(global_flags)s::bool[]) AS l(pattern, precedence, is_global)
                        WHERE keyed.user_key LIKE l.pattern
                        ORDER BY l.precedence DESC LIMIT 1
                    ), false)
                    THEN chr(31) || keyed.user_key
                    ELSE keyed.submitted_by_id::text || chr(31) || keyed.user_key
                END AS key
                FROM keyed
            )
            UPDATE {table} AS e SET concurrency_key = fitting.key
            FROM fitting
            WHERE e.id = fitting.id AND e.status IN ({_UNFINISHED})
                AND e.concurrency_key IS DISTINCT FROM fitting.key
            RETURNING e.job_id, e.concurrency_key
            """,
            {
                "like": user_like,
                "jobs": list(job_ids) if job_ids is not None else None,
                "patterns": patterns,
                "precedences": precedences,
                "global_flags": global_flags,
            },
        )
        return cursor.fetchall()
