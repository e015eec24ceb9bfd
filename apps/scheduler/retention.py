"""Retention: finished work is pruned, so the tables stop growing forever (issue 14).

What goes, by age on the database clock (settings `JOBWEAVER_RETAIN_*`, in days; 0 keeps):
- COMPLETED, FAILED and CANCELLED jobs whose `finished_at` is older than their status's
  retention, each with every row that cascades from it (its execution, its attempts, its
  dead-letter discard) and its outbox events;
- published outbox rows older than the outbox retention (the events already reached Kafka);
- finished workflows (§16) older than their status's retention, with all their jobs at once:
  a job of a workflow is never pruned alone, since its workflow's other rows point at it.

Pruning is not a transition of the state machine (apps/engine/): it deletes jobs
that reached a terminal state and never changes a status. A job is terminal for good unless an
operator retries it; the row lock below makes a prune and such a retry exclude each other (the
loser sees the job gone, or skips it until next time).

Locking rules. Each batch is ONE statement in its own short transaction: it picks at most
`batch_size` rows oldest first with FOR UPDATE SKIP LOCKED — a row someone holds right now (an
operator's retry, the relay marking an event published) is skipped and taken next time — and
deletes them. No lock outlives a batch, and submit and dispatch never wait on pruning: they
touch live rows, which pruning never selects. A job that still has an unpublished event is kept
until the relay has published it, so pruning never loses an event.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import connection, models, transaction

from jobweaver.conf import settings
from jobweaver.jobs.models import Job
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.models import ExecutionStatus, JobExecution
from jobweaver.workflows.models import Node, Workflow, WorkflowStatus

logger = logging.getLogger(__name__)

SECONDS_PER_DAY = 86400.0
OUTBOX = "published outbox events"


@dataclass(frozen=True)
class _JobRule:
    kind: str  # how `prune` reports it
    status: ExecutionStatus
    setting: str


JOB_RULES = (
    _JobRule("completed jobs", ExecutionStatus.COMPLETED, "JOBWEAVER_RETAIN_COMPLETED_DAYS"),
    _JobRule("failed jobs", ExecutionStatus.FAILED, "JOBWEAVER_RETAIN_FAILED_DAYS"),
    _JobRule("cancelled jobs", ExecutionStatus.CANCELLED, "JOBWEAVER_RETAIN_CANCELLED_DAYS"),
)
WORKFLOW_RULES = (
    _JobRule("completed workflows", WorkflowStatus.COMPLETED, "JOBWEAVER_RETAIN_COMPLETED_DAYS"),
    _JobRule("failed workflows", WorkflowStatus.FAILED, "JOBWEAVER_RETAIN_FAILED_DAYS"),
    _JobRule("cancelled workflows", WorkflowStatus.CANCELLED, "JOBWEAVER_RETAIN_CANCELLED_DAYS"),
)
KINDS = (*(rule.kind for rule in JOB_RULES), *(rule.kind for rule in WORKFLOW_RULES), OUTBOX)
# A workflow holds up to JOBWEAVER_MAX_WORKFLOW_JOBS jobs: a batch of workflows is this many
# times smaller than a batch of jobs.
WORKFLOWS_PER_JOB_BATCH = 100


def _cutoff_sql(age: str) -> str:
    """The time before which rows go: the database clock less `age` (a placeholder), as a
    scalar subquery. PostgreSQL evaluates it once per statement, so the row's time is compared
    with a value and the index on it (`jw_outbox_published`, `jw_execution_finished`) finds the old
    rows. Written in as `clock_timestamp() - …`, a volatile expression, it was checked row by
    row instead: each prune read every published event of the retained day to delete none of
    them, a cost growing with the day's traffic (bench/NOTES.md)."""
    return f"(SELECT clock_timestamp() - make_interval(secs => {age}))"


def _age_seconds(setting: str) -> float | None:
    days = getattr(settings, setting)
    return days * SECONDS_PER_DAY if days > 0 else None


def _job_children() -> list[tuple[str, str]]:
    """(table, column) of every row that cascades from a job (execution, attempts, discards):
    found from the models, so a new child table is pruned with its job without a change here."""
    children = []
    # include_hidden: a foreign key with related_name="+" (the dashboard's discards) counts too.
    for relation in Job._meta.get_fields(include_hidden=True):
        if not relation.auto_created or relation.concrete or relation.many_to_many:
            continue  # only reverse relations: foreign keys of other tables pointing at jobs
        if relation.on_delete is not models.CASCADE:
            continue
        children.append((relation.related_model._meta.db_table, relation.field.column))
    return sorted(children)


def _doomed_jobs_sql(*, limit: bool) -> str:
    """The executions of one status finished before the cutoff, whose events all went out."""
    executions, outbox = JobExecution._meta.db_table, OutboxEvent._meta.db_table
    return f"""
        SELECT e.id, e.job_id FROM {executions} AS e
        WHERE e.status = %(status)s
          AND e.finished_at < {_cutoff_sql("%(age)s")}
          AND NOT EXISTS (
              SELECT 1 FROM {outbox} AS o
              WHERE o.key = e.job_id::text AND o.published_at IS NULL
          )
          AND NOT EXISTS (SELECT 1 FROM {Node._meta.db_table} AS n WHERE n.job_id = e.job_id)
        {"ORDER BY e.finished_at LIMIT %(limit)s FOR UPDATE OF e SKIP LOCKED" if limit else ""}
    """


def _doomed_workflows_sql(*, limit: bool) -> str:
    """The workflows of one status finished before the cutoff, whose events (theirs and their
    jobs') all went out."""
    workflows, nodes, outbox = (
        Workflow._meta.db_table,
        Node._meta.db_table,
        OutboxEvent._meta.db_table,
    )
    return f"""
        SELECT w.id FROM {workflows} AS w
        WHERE w.status = %(status)s
          AND w.finished_at < {_cutoff_sql("%(age)s")}
          AND NOT EXISTS (
              SELECT 1 FROM {outbox} AS o WHERE o.published_at IS NULL AND (
                  o.key = w.id::text
                  OR o.key IN (SELECT n.job_id::text FROM {nodes} AS n WHERE n.workflow_id = w.id)
              )
          )
        {"ORDER BY w.finished_at LIMIT %(limit)s FOR UPDATE OF w SKIP LOCKED" if limit else ""}
    """


def _prune_jobs_batch(rule: _JobRule, *, age: float, limit: int) -> int:
    """Delete up to `limit` jobs of `rule` and everything hanging off them, in one statement.
    Foreign keys are checked at commit (Django makes them DEFERRABLE INITIALLY DEFERRED), when
    the children are gone too."""
    deletes = [
        f"d{n} AS (DELETE FROM {table} AS c USING doomed WHERE c.{column} = doomed.job_id)"
        for n, (table, column) in enumerate(_job_children())
    ]
    deletes.append(
        f"events AS (DELETE FROM {OutboxEvent._meta.db_table} AS o USING doomed "
        "WHERE o.key = doomed.job_id::text)"
    )
    sql = f"""
        WITH doomed AS ({_doomed_jobs_sql(limit=True)}), {", ".join(deletes)}
        DELETE FROM {Job._meta.db_table} AS j USING doomed WHERE j.id = doomed.job_id
    """
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(sql, {"status": rule.status.value, "age": age, "limit": limit})
        return cursor.rowcount


def _prune_workflows_batch(rule: _JobRule, *, age: float, limit: int) -> int:
    """Delete up to `limit` workflows of `rule` with all their jobs, everything hanging off
    those, and their events, in one statement."""
    nodes = Node._meta.db_table
    deletes = [
        f"d{n} AS (DELETE FROM {table} AS c USING doomed WHERE c.{column} = doomed.job_id)"
        for n, (table, column) in enumerate(_job_children())
    ]
    outbox, jobs = OutboxEvent._meta.db_table, Job._meta.db_table
    deletes += [
        f"events AS (DELETE FROM {outbox} AS o USING doomed WHERE o.key = doomed.job_id::text)",
        f"own_events AS (DELETE FROM {outbox} AS o USING doomed_w WHERE o.key = doomed_w.id::text)",
        f"jobs AS (DELETE FROM {jobs} AS j USING doomed WHERE j.id = doomed.job_id)",
    ]
    sql = f"""
        WITH doomed_w AS ({_doomed_workflows_sql(limit=True)}),
        doomed AS (SELECT n.job_id FROM {nodes} AS n JOIN doomed_w ON n.workflow_id = doomed_w.id),
        {", ".join(deletes)}
        DELETE FROM {Workflow._meta.db_table} AS w USING doomed_w WHERE w.id = doomed_w.id
    """
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(sql, {"status": rule.status.value, "age": age, "limit": limit})
        return cursor.rowcount


def _prune_outbox_batch(*, age: float, limit: int) -> int:
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(_outbox_batch_sql(), [age, limit])
        return cursor.rowcount


def _outbox_batch_sql() -> str:
    """Delete up to a limit (the second parameter) of the oldest events published before the
    cutoff (the first: an age in seconds)."""
    outbox = OutboxEvent._meta.db_table
    return f"""
        DELETE FROM {outbox} WHERE id IN (
            SELECT id FROM {outbox}
            WHERE published_at < {_cutoff_sql("%s")}
            ORDER BY published_at LIMIT %s
            FOR UPDATE SKIP LOCKED
        )
        """


def retention_preview() -> dict[str, int]:
    """What a prune would delete now, per kind (nothing is deleted)."""
    counts = dict.fromkeys(KINDS, 0)
    with connection.cursor() as cursor:
        for rule in JOB_RULES:
            age = _age_seconds(rule.setting)
            if age is not None:
                cursor.execute(
                    f"SELECT count(*) FROM ({_doomed_jobs_sql(limit=False)}) AS doomed",
                    {"status": rule.status.value, "age": age},
                )
                counts[rule.kind] = cursor.fetchone()[0]
        for rule in WORKFLOW_RULES:
            age = _age_seconds(rule.setting)
            if age is not None:
                cursor.execute(
                    f"SELECT count(*) FROM ({_doomed_workflows_sql(limit=False)}) AS doomed",
                    {"status": rule.status.value, "age": age},
                )
                counts[rule.kind] = cursor.fetchone()[0]
        age = _age_seconds("JOBWEAVER_RETAIN_PUBLISHED_OUTBOX_DAYS")
        if age is not None:
            cursor.execute(
                f"SELECT count(*) FROM {OutboxEvent._meta.db_table} "
                f"WHERE published_at < {_cutoff_sql('%s')}",
                [age],
            )
            counts[OUTBOX] = cursor.fetchone()[0]
    return counts


def retention_prune(*, batch_size: int | None = None) -> dict[str, int]:
    """Delete what the retention settings let go, in batches of `batch_size` (default
    JOBWEAVER_PRUNE_BATCH_SIZE), each its own transaction; returns how many went per kind.
    Must not run inside a transaction: that would hold every batch's locks to the end."""
    limit = batch_size or settings.JOBWEAVER_PRUNE_BATCH_SIZE
    pruned = dict.fromkeys(KINDS, 0)
    batches: list = []
    outbox_age = _age_seconds("JOBWEAVER_RETAIN_PUBLISHED_OUTBOX_DAYS")
    if outbox_age is not None:
        batches.append((OUTBOX, limit, lambda: _prune_outbox_batch(age=outbox_age, limit=limit)))
    for rule in JOB_RULES:
        age = _age_seconds(rule.setting)
        if age is not None:
            batches.append(
                (
                    rule.kind,
                    limit,
                    lambda rule=rule, age=age: _prune_jobs_batch(rule, age=age, limit=limit),
                )
            )
    few = max(1, limit // WORKFLOWS_PER_JOB_BATCH)
    for rule in WORKFLOW_RULES:
        age = _age_seconds(rule.setting)
        if age is not None:
            batches.append(
                (
                    rule.kind,
                    few,
                    lambda rule=rule, age=age: _prune_workflows_batch(rule, age=age, limit=few),
                )
            )
    for kind, most, prune_batch in batches:
        while True:
            deleted = prune_batch()
            pruned[kind] += deleted
            # Fewer than a full batch: done for now (rows skipped as locked go next time).
            if deleted < most:
                break
    if any(pruned.values()):
        logger.info(
            "pruned %s", ", ".join(f"{count} {kind}" for kind, count in pruned.items() if count)
        )
    return pruned
