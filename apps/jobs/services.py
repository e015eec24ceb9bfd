"""Writes on jobs: submission and operator actions. Used alike by the API, the CLI and the
admin, so every entry point validates, de-duplicates and dispatches the same way."""

from __future__ import annotations

import logging
import re
import uuid
from collections import Counter
from dataclasses import dataclass

from django.db import IntegrityError, connection, transaction

from jobweaver.accounts.selectors import holds
from jobweaver.conf import settings
from jobweaver.core import metrics
from jobweaver.core.db import (
    DatabaseNow,
    assert_in_transaction,
    insert_rows,
    new_instance,
    seconds,
)
from jobweaver.core.errors import Forbidden, IdempotencyConflict, InvalidRequest, QuotaExceeded
from jobweaver.core.logcontext import log_context
from jobweaver.core.tracing import current_traceparent
from jobweaver.engine.executions import executions_create
from jobweaver.jobs.models import Job
from jobweaver.jobs.selectors import active_job_count, parse_job_id
from jobweaver.jobs.validation import JobSpec
from jobweaver.scheduler.dispatch import dispatch_due_jobs, dispatch_job_now
from jobweaver.scheduler.models import ExecutionStatus
from jobweaver.scheduler.services import execution_cancel, execution_retry, execution_run_now

logger = logging.getLogger(__name__)

TRACE_ID_PATTERN = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
IDEMPOTENCY_KEY_PATTERN = re.compile(r"^[\x20-\x7e]+$")  # printable ASCII
MAX_IDEMPOTENCY_KEY_CHARS = 255  # the column's width; the setting may only lower it
HIGH_PRIORITY = "jobweaver_jobs.submit_high_priority"
# pg_advisory_xact_lock(namespace, user id): one submitter's cap check at a time.
ACTIVE_CAP_LOCK_NAMESPACE = 0x4A57
# pg_advisory_xact_lock(namespace, hashtext(user id:unique key)): one look-up-then-insert per
# unique key at a time (a hash collision only serializes two keys, it never merges them).
UNIQUE_KEY_LOCK_NAMESPACE = 0x4A58
# uniqueScope -> the statuses a job must be in to count as the duplicate ("period": any).
UNIQUE_SCOPE_STATUSES = {
    "waiting": (ExecutionStatus.PENDING, ExecutionStatus.DISPATCHED),
    "active": (ExecutionStatus.PENDING, ExecutionStatus.DISPATCHED, ExecutionStatus.RUNNING),
    "period": None,
}


@dataclass(frozen=True)
class SubmitResult:
    job: Job
    created: bool  # False when an idempotency key or a unique key returned an earlier job


def job_submit(
    *,
    spec: JobSpec,
    submitted_by=None,
    idempotency_key: str | None = None,
    trace_id: str | None = None,
) -> SubmitResult:
    """Persist a validated job with its PENDING execution and a JobCreated event, in one
    transaction, then dispatch it at once if it is due (fast path): the batch pipeline with a
    batch of one.

    With an idempotency key (scoped to `submitted_by`), a replay of the same request returns the
    original job; the same key with a different request raises IdempotencyConflict. With a
    unique key (`spec.unique_key`, also scoped to `submitted_by`), a job with that key in the
    spec's scope is returned instead of a new one, whatever its request was.
    """
    trace_id = _clean_trace_id(trace_id)
    fingerprint = None
    if idempotency_key is not None:
        _check_idempotency_key(idempotency_key)
        fingerprint = spec.fingerprint()
        existing = _job_by_idempotency_key(submitted_by, idempotency_key)
        if existing is not None:
            return _replay(existing, fingerprint)
    try:
        [(job, created)] = _jobs_submit(
            [spec],
            submitted_by=submitted_by,
            trace_id=trace_id,
            idempotency_key=idempotency_key,
            fingerprint=fingerprint,
        )
    except IntegrityError:
        # A concurrent request with the same key won the race: replay its job.
        if idempotency_key is None:
            raise
        existing = _job_by_idempotency_key(submitted_by, idempotency_key)
        if existing is None:
            raise
        return _replay(existing, fingerprint)
    return SubmitResult(job=job, created=created)


def job_submit_batch(
    *, specs: list[JobSpec], submitted_by=None, trace_id: str | None = None
) -> list[Job]:
    """Persist validated jobs, all or none, in one transaction of bulk INSERTs (jobs, their
    PENDING executions, their JobCreated events), then dispatch the due ones with one call.

    The jobs share `trace_id` when one is given (one request, one trace); otherwise each gets
    its own. Idempotency keys are per job and not offered here. An item with a unique key that
    matches a job in its scope (or an earlier item of this batch) gets that job in its place:
    the result holds one job per item, in order, created or not.
    """
    limit = settings.JOBWEAVER_MAX_BATCH_JOBS
    if not 0 < len(specs) <= limit:
        raise InvalidRequest(f"a batch holds 1 to {limit} jobs, got {len(specs)}")
    trace_id = _clean_trace_id(trace_id) if trace_id else None
    return [job for job, _ in _jobs_submit(specs, submitted_by=submitted_by, trace_id=trace_id)]


def _clean_trace_id(trace_id: str | None) -> str:
    if not trace_id:
        return uuid.uuid4().hex
    if not TRACE_ID_PATTERN.match(trace_id):
        raise InvalidRequest("X-Trace-Id must be 1-64 characters of letters, digits, . _ : -")
    return trace_id


def _check_idempotency_key(key: str) -> None:
    limit = min(settings.JOBWEAVER_MAX_IDEMPOTENCY_KEY_CHARS, MAX_IDEMPOTENCY_KEY_CHARS)
    if not 0 < len(key) <= limit:
        raise InvalidRequest(f"Idempotency-Key must be 1-{limit} characters, got {len(key)}")
    if not IDEMPOTENCY_KEY_PATTERN.match(key):
        raise InvalidRequest("Idempotency-Key must be printable ASCII")


def _job_by_idempotency_key(submitted_by, key: str) -> Job | None:
    return (
        Job.objects.select_related("execution")
        .filter(submitted_by=submitted_by, idempotency_key=key)
        .first()
    )


def _replay(job: Job, fingerprint: str) -> SubmitResult:
    if job.request_fingerprint != fingerprint:
        raise IdempotencyConflict(
            "Idempotency-Key was already used with a different request", job_id=job.id
        )
    return SubmitResult(job=job, created=False)


@transaction.atomic
def _jobs_submit(
    specs: list[JobSpec],
    *,
    submitted_by,
    trace_id: str | None,
    idempotency_key: str | None = None,
    fingerprint: str | None = None,
) -> list[tuple[Job, bool]]:
    """The one submission pipeline: per item, in order, its new job (created) or the job in
    scope with its unique key (not created). `trace_id` is shared by the new jobs; None gives
    each its own. An idempotency key is a single submit's (a batch of one), given with its
    request's fingerprint."""
    assert idempotency_key is None or len(specs) == 1, "an idempotency key names one job"
    duplicates = _unique_duplicates(specs, submitted_by)
    new_specs = [spec for index, spec in enumerate(specs) if index not in duplicates]
    jobs = (
        _jobs_create(new_specs, submitted_by, trace_id, idempotency_key, fingerprint)
        if new_specs
        else []
    )
    created = iter(jobs)
    in_order: list[tuple[Job, bool]] = []
    for index in range(len(specs)):
        duplicate = duplicates.get(index)
        if duplicate is None:
            in_order.append((next(created), True))
        elif isinstance(duplicate, int):  # an earlier item of this batch
            in_order.append((in_order[duplicate][0], False))
        else:
            in_order.append((duplicate, False))
    return in_order


def _check_priority_allowed(specs: list[JobSpec], submitted_by) -> None:
    """Priorities above JOBWEAVER_PRIORITY_PERMISSION_ABOVE need `jobs.submit_high_priority`
    (no limit for trusted callers: `submitted_by=None`). Checked before anything is written."""
    if submitted_by is None:
        return
    threshold = settings.JOBWEAVER_PRIORITY_PERMISSION_ABOVE
    highest = max(spec.priority for spec in specs)
    if highest > threshold and not holds(submitted_by, HIGH_PRIORITY):
        raise Forbidden(f"priority above {threshold} needs the {HIGH_PRIORITY} permission")


def _check_active_cap(submitted_by, added: int) -> None:
    """At most JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER of the user's jobs may wait or run (none for
    trusted callers: `submitted_by=None`).

    Runs inside the submit transaction, *after* its `added` jobs are written: the count then
    includes them, and the advisory lock it takes serializes one user's submissions only from
    here to commit. Taken before the inserts, it made a user's concurrent batches write one at a
    time (bench/batch_submit.py). The lock is what keeps the count exact: a concurrent
    submission of the same user waits here until this one commits or rolls back, and its count
    (a new statement, READ COMMITTED) then sees this one's jobs. Over the cap, the exception
    rolls the transaction back, and the jobs with it.
    """
    if submitted_by is None:
        return
    assert_in_transaction("the active-jobs cap check")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(%s, %s)", [ACTIVE_CAP_LOCK_NAMESPACE, submitted_by.pk]
        )
    cap = settings.JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER
    active = active_job_count(user=submitted_by)  # this submission's jobs included
    if active > cap:
        raise QuotaExceeded(
            f"at most {cap} jobs may wait or run per user; you have {active - added}, this "
            f"submission adds {added}"
        )


def _lock_unique_keys(submitted_by, keys: list[str]) -> None:
    """Serialize the submissions of these unique keys until commit. Must run inside the submit
    transaction, before the look-up: a concurrent submitter of the same key waits here, and
    its look-up (a new statement, READ COMMITTED) then sees the job this one created."""
    assert_in_transaction("the unique-key lock")
    owner = "" if submitted_by is None else str(submitted_by.pk)
    with connection.cursor() as cursor:
        for key in sorted(set(keys)):  # one order for everyone: no deadlock between batches
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
                [UNIQUE_KEY_LOCK_NAMESPACE, f"{owner}:{key}"],
            )


def _unique_duplicate(spec: JobSpec, submitted_by) -> Job | None:
    """The submitter's newest job with `spec.unique_key` inside `spec.unique_scope`."""
    jobs = Job.objects.select_related("execution").filter(
        submitted_by=submitted_by, unique_key=spec.unique_key
    )
    statuses = UNIQUE_SCOPE_STATUSES[spec.unique_scope]
    if statuses is not None:
        jobs = jobs.filter(execution__status__in=statuses)
    else:
        jobs = jobs.filter(created_at__gte=DatabaseNow() - seconds(spec.unique_for_seconds))
    return jobs.order_by("-created_at").first()


def _unique_duplicates(specs: list[JobSpec], submitted_by) -> dict[int, Job | int]:
    """Items that create no job, by index: the job in scope with the same unique key, or the
    index of the earlier item with that key. Must run inside the submit transaction."""
    keyed = [(index, spec) for index, spec in enumerate(specs) if spec.unique_key is not None]
    if not keyed:
        return {}
    _lock_unique_keys(submitted_by, [spec.unique_key for _, spec in keyed])
    duplicates: dict[int, Job | int] = {}
    first: dict[str, Job | int] = {}
    for index, spec in keyed:
        if spec.unique_key in first:
            duplicates[index] = first[spec.unique_key]
            continue
        duplicate = _unique_duplicate(spec, submitted_by)
        if duplicate is not None:
            duplicates[index] = duplicate
        first[spec.unique_key] = duplicate if duplicate is not None else index
    return duplicates


def jobs_create_waiting(
    *, specs: list[JobSpec], waiting: set[int], submitted_by, trace_id: str
) -> list[Job]:
    """A workflow's jobs (ARCHITECTURE §16), in the caller's transaction: the submission
    pipeline's checks and rows, the jobs at the indexes in `waiting` WAITING rather than
    PENDING. No unique keys (the caller refuses them) and no idempotency key."""
    return _jobs_create(specs, submitted_by, trace_id, None, waiting=waiting)


def _jobs_create(
    specs: list[JobSpec],
    submitted_by,
    trace_id: str | None,
    idempotency_key: str | None,
    fingerprint: str | None = None,
    *,
    waiting: set[int] = frozenset(),
) -> list[Job]:
    """Write the new jobs with one INSERT each for the jobs, their executions and their
    JobCreated events, check the cap, and dispatch them after commit (those in `waiting`,
    by index, wait for their dependencies instead). A job with an idempotency key stores its
    request's `fingerprint`."""
    _check_priority_allowed(specs, submitted_by)
    traceparent = current_traceparent()
    jobs = [
        _job_from_spec(
            spec,
            submitted_by=submitted_by,
            trace_id=trace_id or uuid.uuid4().hex,
            traceparent=traceparent,
            fingerprint=fingerprint or "",
            idempotency_key=idempotency_key,
        )
        for spec in specs
    ]
    insert_rows(jobs)
    executions = executions_create(jobs=jobs, waiting=[jobs[index].id for index in waiting])
    for job, execution in zip(jobs, executions, strict=True):
        job.execution = execution
    _check_active_cap(submitted_by, len(jobs))
    job_ids = [job.id for index, job in enumerate(jobs) if index not in waiting]
    for job_type, count in Counter(job.job_type for job in jobs).items():
        submitted = metrics.JOBS_SUBMITTED.labels(job_type)
        metrics.count_on_commit(lambda submitted=submitted, count=count: submitted.inc(count))
    transaction.on_commit(lambda: _dispatch_now(job_ids))
    if len(jobs) == 1:
        (job,) = jobs
        with log_context(trace_id=job.trace_id, job_id=job.id):
            logger.info("job %s submitted (trace %s)", job.id, job.trace_id)
    else:
        logger.info("batch of %d jobs submitted", len(jobs))
    return jobs


def _job_from_spec(
    spec: JobSpec,
    *,
    submitted_by,
    trace_id: str,
    traceparent: str,
    fingerprint: str,
    idempotency_key: str | None = None,
) -> Job:
    """The unsaved Job row of a validated request."""
    return new_instance(
        Job,
        {
            "job_type": spec.job_type,
            "instruction": spec.instruction,
            "trace_id": trace_id,
            "traceparent": traceparent,
            "idempotency_key": idempotency_key,
            "request_fingerprint": fingerprint,
            "priority": spec.priority,
            "max_retries": spec.max_retries,
            "run_at": spec.run_at,
            "timeout_seconds": spec.timeout_seconds,
            "queue_name": spec.queue_name,
            "task_priority": spec.task_priority,
            "unique_key": spec.unique_key,
            "concurrency_key": spec.concurrency_key,
            "retry_on": list(spec.retry_on) if spec.retry_on is not None else None,
            "retry_backoff": list(spec.retry_backoff) if spec.retry_backoff is not None else None,
            "retry_jitter": spec.retry_jitter,
            "hard_timeout_seconds": spec.hard_timeout_seconds,
            "submitted_by_id": submitted_by.pk if submitted_by is not None else None,
        },
    )


def _dispatch_now(job_ids: list[uuid.UUID]) -> None:
    """Fast path after a submit commits, best effort: on a broker error the jobs stay PENDING
    and the next dispatch sends them."""
    if len(job_ids) == 1:
        dispatch_job_now(job_ids[0])  # the scheduler's own fast path for one job
        return
    try:
        dispatch_due_jobs(job_ids=job_ids)
    except Exception:  # the beat tick is the safety net; the error is logged with its traceback
        logger.warning("fast-path dispatch of a batch failed; beat will retry", exc_info=True)


@transaction.atomic
def job_retry(*, job_id: str | uuid.UUID) -> None:
    """Operator retry of a FAILED or CANCELLED job with a fresh retry budget. The job waits
    again, so it counts against its owner's active-jobs cap like a submit (§17): otherwise
    cancel-then-retry would hold more jobs than the cap allows."""
    execution = execution_retry(job_id=parse_job_id(job_id))
    if execution.submitted_by_id is not None and execution.status != ExecutionStatus.WAITING:
        _check_active_cap(execution.submitted_by, added=1)


def job_cancel(*, job_id: str | uuid.UUID) -> None:
    """Cancel a job: at once when it has not started, cooperatively when it runs."""
    execution_cancel(job_id=parse_job_id(job_id))


def job_run_now(*, job_id: str | uuid.UUID) -> None:
    """Make a delayed PENDING job (runAt or backoff) due at once."""
    execution_run_now(job_id=parse_job_id(job_id))
