"""Reads of jobs, with their execution state and attempts."""

from __future__ import annotations

import functools
import uuid
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count, Exists, Min, OuterRef, Q, QuerySet

from jobweaver.accounts.selectors import holds
from jobweaver.core.errors import Forbidden, InvalidRequest, JobNotFound
from jobweaver.executor.models import AttemptOutcome, ExecutionAttempt
from jobweaver.jobs.models import DeadLetterDiscard, Job
from jobweaver.jobs.representation import attempt_to_dict, job_to_dict
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.models import ExecutionStatus, JobExecution, status_literal
from jobweaver.workflows.models import Dependency, Node


def parse_job_id(raw: str | uuid.UUID) -> uuid.UUID:
    if isinstance(raw, uuid.UUID):
        return raw
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        # Not a job id at all, so the error's jobId (a UUID) stays empty; the message names it.
        raise JobNotFound(f"Job {str(raw)[:100]} not found") from None


def attempts_for_jobs(*, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[ExecutionAttempt]]:
    """Attempts of each job, oldest first (one query for a whole page)."""
    grouped: dict[uuid.UUID, list[ExecutionAttempt]] = {job_id: [] for job_id in job_ids}
    for attempt in ExecutionAttempt.objects.filter(job_id__in=job_ids).order_by(
        "job_id", "attempt"
    ):
        grouped[attempt.job_id].append(attempt)
    return grouped


def dependencies_for_jobs(*, job_ids: list[uuid.UUID]) -> dict[uuid.UUID, list[uuid.UUID]]:
    """The jobs each job depends on in its workflow (§16), one query for a whole page."""
    grouped: dict[uuid.UUID, list[uuid.UUID]] = {job_id: [] for job_id in job_ids}
    edges = Dependency.objects.filter(job_id__in=job_ids).order_by("id")  # dependsOn's order
    for job_id, parent in edges.values_list("job_id", "depends_on_id"):
        grouped[job_id].append(parent)
    return grouped


def parent_results(*, job_id: uuid.UUID) -> tuple[str, dict]:
    """What a workflow's job gets of its dependencies (§16): how it takes them (its node's
    `parent_results_as`) and their return values by ref, in its dependsOn order (None for a
    dependency with no result, e.g. a SIMULATION job or one that did not complete)."""
    node = Node.objects.filter(job_id=job_id).values_list("parent_results_as", flat=True).first()
    if node is None:
        return "", {}
    parents = list(
        Dependency.objects.filter(job_id=job_id)
        .order_by("id")
        .values_list("depends_on_id", flat=True)
    )
    refs = dict(Node.objects.filter(job_id__in=parents).values_list("job_id", "ref"))
    results = dict(
        ExecutionAttempt.objects.filter(
            job_id__in=parents, outcome=AttemptOutcome.SUCCESS
        ).values_list("job_id", "result")
    )
    return node, {refs[parent]: results.get(parent) for parent in parents}


def attempts_finished_since(*, job_ids, since: datetime) -> dict[str, int]:
    """How many attempts of these jobs (ids or a subquery) finished since `since`, and how many
    of those failed (FAILURE or LOST)."""
    return ExecutionAttempt.objects.filter(job_id__in=job_ids, finished_at__gte=since).aggregate(
        finished=Count("event_id"),
        failed=Count(
            "event_id", filter=Q(outcome__in=[AttemptOutcome.FAILURE, AttemptOutcome.LOST])
        ),
    )


VIEW_ALL_JOBS = "jobweaver_jobs.view_all_jobs"
OPERATE_ALL_JOBS = "jobweaver_jobs.operate_all_jobs"


def owned_by(queryset: QuerySet, user, *, owner: str = "submitted_by") -> QuerySet:
    """`queryset` narrowed to the rows of `user`'s jobs (`owner`: the path to the job's
    owner), unless they may see every user's (jobs.view_all_jobs) or are a trusted caller."""
    if user is None or holds(user, VIEW_ALL_JOBS):
        return queryset
    return queryset.filter(**{owner: user})


def _visible_jobs(user) -> QuerySet[Job]:
    """Jobs `user` may see: their own, or all with `jobs.view_all_jobs` (staff status alone
    grants nothing). `user=None` is a trusted caller (the CLI, the admin's actions): all."""
    jobs = Job.objects.select_related("execution", "workflow_node")
    if user is not None and not holds(user, VIEW_ALL_JOBS):
        jobs = jobs.filter(submitted_by=user)
    return jobs


def job_get(*, job_id: str | uuid.UUID, user=None) -> Job:
    """A job visible to `user` (see `_visible_jobs`), or JobNotFound."""
    parsed = parse_job_id(job_id)
    job = _visible_jobs(user).filter(id=parsed).first()
    if job is None:
        raise JobNotFound(f"Job {parsed} not found", job_id=parsed)
    return job


def may_operate(user, owner_id) -> bool:
    """Whether `user` may retry, cancel or discard a job of `owner_id` (§17): their own, or
    any with `jobs.operate_all_jobs`. `user=None` is a trusted caller (the CLI)."""
    return user is None or owner_id == user.pk or holds(user, OPERATE_ALL_JOBS)


def job_to_operate(*, job_id: str | uuid.UUID, user=None) -> Job:
    """A job `user` may act on: one they can see (else JobNotFound) that is theirs, or any
    with `jobs.operate_all_jobs` (else Forbidden: seeing another's job is not acting on it)."""
    job = job_get(job_id=job_id, user=user)
    if not may_operate(user, job.submitted_by_id):
        raise Forbidden("acting on another user's job needs jobweaver_jobs.operate_all_jobs")
    return job


def job_detail(*, job_id: str | uuid.UUID, user=None) -> dict:
    """The job detail of ARCHITECTURE §8 (the API's and `submit_job --json`'s), attempts oldest
    first, for a job visible to `user`; JobNotFound otherwise."""
    job = job_get(job_id=job_id, user=user)
    attempts = attempts_for_jobs(job_ids=[job.id])[job.id]
    depends_on = dependencies_for_jobs(job_ids=[job.id])[job.id]
    return job_to_dict(job, attempts, tracebacks=sees_tracebacks(user), depends_on=depends_on)


def sees_tracebacks(user) -> bool:
    """Tracebacks are the server's code: operators (view_all_jobs) and trusted callers (the
    CLI) see them, a submitter sees the exception's type and message (§17)."""
    return user is None or holds(user, VIEW_ALL_JOBS)


def active_job_count(*, user) -> int:
    """How many of `user`'s jobs wait or run (PENDING, DISPATCHED, RUNNING)."""
    return _active_job_count(user.pk)


INTEGER_KEYS = {"AutoField", "BigAutoField", "SmallAutoField", "IntegerField", "BigIntegerField"}


def active_job_count_warm_up() -> None:
    """The cap's count of every submit, for a user id no user has (ids start at 1): a web
    worker runs it on each request thread's new connection (jobweaver.core.db.warm_connection).
    Only with integer user ids: the statement prepared is the one for the ids' type."""
    if get_user_model()._meta.pk.get_internal_type() in INTEGER_KEYS:
        _active_job_count(0)


def _active_job_count(user_id: int) -> int:
    with connection.cursor() as cursor:
        cursor.execute(_active_count_sql(), [user_id, user_id])
        return cursor.fetchone()[0]


@functools.cache
def _active_count_sql() -> str:
    """`active_job_count`'s SQL: the user's waiting executions from their own partial index
    (jw_execution_pending_by_user), plus the user's among the executions in flight, which flow
    control keeps to a few per executor slot (jw_execution_live_leases). The submitter is copied
    onto the execution for this; the statuses are written in so the conditions match the
    indexes'. Through a join to the user's jobs it read every job the user ever kept, or every
    execution anyone has waiting, on every submission (bench/NOTES.md)."""
    executions = JobExecution._meta.db_table
    pending = status_literal(ExecutionStatus.PENDING)
    in_flight = ", ".join(
        status_literal(s) for s in (ExecutionStatus.DISPATCHED, ExecutionStatus.RUNNING)
    )
    return (
        f"SELECT (SELECT count(*) FROM {executions} "
        f"WHERE submitted_by_id = %s AND status = {pending}) "
        f"+ (SELECT count(*) FROM {executions} "
        f"WHERE submitted_by_id = %s AND status IN ({in_flight}))"
    )


# The API's sort keys (camelCase, "-" for descending) and the columns they order by.
JOB_SORT_FIELDS = {
    "createdAt": "created_at",
    "updatedAt": "updated_at",
    "priority": "priority",
    "nextRunAt": "execution__next_run_at",
    "status": "execution__status",
}
JOB_SORT_KEYS = tuple(
    key for field in JOB_SORT_FIELDS for key in (field, f"-{field}")
)  # fmt: skip


def job_list(
    *,
    user=None,
    status: str | None = None,
    job_type: str | None = None,
    priority: int | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    trace_id: str | None = None,
    sort: str = "-createdAt",
    page: int = 0,
    size: int = 20,
) -> tuple[list[Job], int]:
    """One page of the jobs visible to `user` after filters (`created_after` inclusive,
    `created_before` exclusive), ordered by `sort` (one of JOB_SORT_KEYS; ties by id), and the
    total count after filters."""
    jobs = _visible_jobs(user)
    if status:
        if status not in ExecutionStatus.values:
            raise InvalidRequest(
                f"status must be one of {', '.join(ExecutionStatus.values)}, got {status!r}"
            )
        jobs = jobs.filter(execution__status=status)
    if job_type:
        jobs = jobs.filter(job_type=job_type)
    if priority is not None:
        jobs = jobs.filter(priority=priority)
    if created_after is not None:
        jobs = jobs.filter(created_at__gte=created_after)
    if created_before is not None:
        jobs = jobs.filter(created_at__lt=created_before)
    if trace_id:
        jobs = jobs.filter(trace_id=trace_id)
    if sort not in JOB_SORT_KEYS:
        raise InvalidRequest(f"sort must be one of {', '.join(JOB_SORT_KEYS)}, got {sort!r}")
    descending = sort.startswith("-")
    column = JOB_SORT_FIELDS[sort.lstrip("-")]
    order = [f"-{column}" if descending else column, "-id" if descending else "id"]
    total = jobs.count()
    return list(jobs.order_by(*order)[page * size : (page + 1) * size]), total


def job_attempts(*, job_id: str | uuid.UUID, user=None) -> dict:
    """`{"jobId", "attempts"}` of a job visible to `user`, attempts oldest first and shaped as
    in the job detail; JobNotFound otherwise."""
    job = job_get(job_id=job_id, user=user)
    attempts = attempts_for_jobs(job_ids=[job.id])[job.id]
    return {"jobId": str(job.id), "attempts": [attempt_to_dict(a) for a in attempts]}


def job_stats(*, user=None) -> dict:
    """Counts by status, dead letters waiting for an operator, the age of the oldest due job,
    and the last hour's throughput and attempt failure rate, over the jobs visible to `user`.
    Ages and windows are measured on the database clock."""
    jobs = _visible_jobs(user)
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        (now,) = cursor.fetchone()
    hour_ago = now - timedelta(hours=1)
    by_status = dict.fromkeys(ExecutionStatus.values, 0)
    for row in jobs.values("execution__status").annotate(count=Count("id")).order_by():
        by_status[row["execution__status"]] = row["count"]
    oldest_due = jobs.filter(
        execution__status=ExecutionStatus.PENDING, execution__next_run_at__lte=now
    ).aggregate(oldest=Min("execution__next_run_at"))["oldest"]
    last_hour = jobs.filter(execution__finished_at__gte=hour_ago).aggregate(
        completed=Count("id", filter=Q(execution__status=ExecutionStatus.COMPLETED)),
        dead_lettered=Count("id", filter=Q(execution__status=ExecutionStatus.FAILED)),
    )
    attempts = attempts_finished_since(job_ids=jobs.values("id"), since=hour_ago)
    return {
        "countsByStatus": by_status,
        "deadLetters": by_status[ExecutionStatus.FAILED],
        "oldestDueJobAgeSeconds": (
            round((now - oldest_due).total_seconds(), 3) if oldest_due is not None else None
        ),
        "lastHour": {
            "completed": last_hour["completed"],
            "deadLettered": last_hour["dead_lettered"],
            "throughputPerMinute": round(last_hour["completed"] / 60, 3),
            "attemptsFinished": attempts["finished"],
            "attemptsFailed": attempts["failed"],
            "failureRate": (
                round(attempts["failed"] / attempts["finished"], 4) if attempts["finished"] else 0.0
            ),
        },
    }


# --- dead letters and events ------------------------------------------------------------------


def discarded_since_failure(*, job="job_id", finished_at="finished_at") -> Exists:
    """Whether a job's current dead letter was discarded (a discard at or after its failure).
    `job` and `finished_at` name the job id and the execution's finish time from the model
    queried (defaults: JobExecution's; from Job: "id" and "execution__finished_at")."""
    return Exists(
        DeadLetterDiscard.objects.filter(
            job_id=OuterRef(job), discarded_at__gte=OuterRef(finished_at)
        )
    )


def is_discarded(*, job_id: uuid.UUID, finished_at: datetime | None) -> bool:
    discards = DeadLetterDiscard.objects.filter(job_id=job_id)
    if finished_at is not None:
        discards = discards.filter(discarded_at__gte=finished_at)
    return discards.exists()


def job_events(*, job_id: uuid.UUID) -> list[OutboxEvent]:
    """The job's domain events (job-created, job-completed, ...), oldest first, with whether
    the relay has published each."""
    return list(OutboxEvent.objects.filter(key=str(job_id)).order_by("created_at", "id"))
