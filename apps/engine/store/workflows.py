"""A workflow's rows (ARCHITECTURE §16): its nodes' counts of dependencies not settled, its own
counts of unfinished and failed jobs, and the locks that make each count exact.

Every count is changed by an UPDATE of its row, which waits for that row's lock and then
applies to the committed value: of many transactions settling the dependencies of one job (or
the jobs of one workflow) at once, exactly one brings the count to zero. Rows are locked in
job id order, so two such transactions never wait for each other in a circle.
"""

from __future__ import annotations

import uuid
from functools import cache

from django.db import connection

from jobweaver.engine.store import named
from jobweaver.scheduler.models import JobExecution
from jobweaver.workflows.models import Dependency, Node, Workflow


@cache
def tables() -> dict[str, str]:
    """The quoted table names of the workflow's rows and of executions."""
    qn = connection.ops.quote_name
    return {
        "node": qn(Node._meta.db_table),
        "dependency": qn(Dependency._meta.db_table),
        "workflow": qn(Workflow._meta.db_table),
        "execution": qn(JobExecution._meta.db_table),
    }


@named("SELECT the workflow a job belongs to (its node), if any")
def workflow_of(job_id: uuid.UUID) -> uuid.UUID | None:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT workflow_id FROM {tables()['node']} WHERE job_id = %s", [job_id])
        row = cursor.fetchone()
    return row[0] if row else None


@named("SELECT … FOR UPDATE the nodes depending on some jobs, in job id order, with statuses")
def dependents_lock(parent_ids: list[uuid.UUID]) -> list[tuple]:
    """(dependent job id, parent job id, ignore_failed_dependencies, the dependent's status)
    for every edge out of `parent_ids`, the dependents' nodes locked."""
    t = tables()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT n.job_id, d.depends_on_id, n.ignore_failed_dependencies, e.status "
            f"FROM {t['dependency']} d JOIN {t['node']} n ON n.job_id = d.job_id "
            f"JOIN {t['execution']} e ON e.job_id = d.job_id "
            "WHERE d.depends_on_id = ANY(%s) ORDER BY n.job_id FOR UPDATE OF n",
            [list(parent_ids)],
        )
        return cursor.fetchall()


@named("UPDATE nodes' counts of dependencies not settled by a delta each; their new counts")
def nodes_count(deltas: dict[uuid.UUID, int]) -> dict[uuid.UUID, int]:
    if not deltas:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {tables()['node']} AS n SET waiting_on = GREATEST(n.waiting_on + v.delta, 0) "
            "FROM unnest(%s::uuid[], %s::int[]) AS v(job_id, delta) WHERE n.job_id = v.job_id "
            "RETURNING n.job_id, n.waiting_on",
            [list(deltas), list(deltas.values())],
        )
        return dict(cursor.fetchall())


@named("UPDATE nodes: the dependency whose failure cancelled each (or none)")
def nodes_cancelled_by(causes: dict[uuid.UUID, uuid.UUID | None]) -> None:
    if not causes:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {tables()['node']} AS n SET cancelled_by_id = v.cause "
            "FROM unnest(%s::uuid[], %s::uuid[]) AS v(job_id, cause) WHERE n.job_id = v.job_id",
            [list(causes), list(causes.values())],
        )


@named("SELECT … FOR UPDATE the CANCELLED nodes a failure of these jobs cancelled, in order")
def cancelled_because_of(job_ids: list[uuid.UUID]) -> list[uuid.UUID]:
    t = tables()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT n.job_id FROM {t['node']} n JOIN {t['execution']} e ON e.job_id = n.job_id "
            "WHERE n.cancelled_by_id = ANY(%s) AND e.status = 'CANCELLED' "
            "ORDER BY n.job_id FOR UPDATE OF n",
            [list(job_ids)],
        )
        return [row[0] for row in cursor.fetchall()]


@named("SELECT the refs of some jobs of a workflow")
def refs(job_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT job_id, ref FROM {tables()['node']} WHERE job_id = ANY(%s)", [list(job_ids)]
        )
        return dict(cursor.fetchall())


@named("SELECT a node's count of dependencies not settled")
def node_waiting_on(job_id: uuid.UUID) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT waiting_on FROM {tables()['node']} WHERE job_id = %s", [job_id])
        row = cursor.fetchone()
    return row[0] if row else 0


@named("SELECT … FOR UPDATE NOWAIT a workflow's unfinished executions, in job id order")
def unfinished_lock_nowait(workflow_id: uuid.UUID) -> list[tuple[uuid.UUID, str]]:
    """(job id, status); raises (LockNotAvailable) at once if one is locked by another
    transaction: the caller tries again, rather than wait while holding the others."""
    t = tables()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT e.job_id, e.status FROM {t['execution']} e "
            f"JOIN {t['node']} n ON n.job_id = e.job_id WHERE n.workflow_id = %s "
            "AND e.status NOT IN ('COMPLETED', 'FAILED', 'CANCELLED') "
            "ORDER BY e.job_id FOR UPDATE OF e NOWAIT",
            [workflow_id],
        )
        return cursor.fetchall()


@named("UPDATE a workflow's counts by deltas; its counts, flags, name and trace after")
def workflow_count(
    workflow_id: uuid.UUID, *, unfinished: int, failed: int, cancelled: bool | None = None
) -> tuple[int, int, bool, str, str, str]:
    """(unfinished, failed, cancelled, status, name, trace id) once the deltas are applied;
    `cancelled`, when given, sets the workflow's cancel flag too."""
    flag = "" if cancelled is None else ", cancelled = %s"
    params = [unfinished, failed] + ([] if cancelled is None else [cancelled]) + [workflow_id]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {tables()['workflow']} SET unfinished = unfinished + %s, "
            f"failed = failed + %s{flag}, version = version + 1, updated_at = clock_timestamp() "
            "WHERE id = %s RETURNING unfinished, failed, cancelled, status, name, trace_id",
            params,
        )
        return cursor.fetchone()


@named("UPDATE a workflow's status (finished: with its finish time; reopened: without)")
def workflow_set_status(workflow_id: uuid.UUID, *, status: str, finished: bool):
    """The workflow's finish time (the database clock) when `finished`, else None."""
    finished_at = "clock_timestamp()" if finished else "NULL"
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {tables()['workflow']} SET status = %s, finished_at = {finished_at}, "
            "version = version + 1, updated_at = clock_timestamp() WHERE id = %s "
            "RETURNING finished_at",
            [status, workflow_id],
        )
        return cursor.fetchone()[0]
