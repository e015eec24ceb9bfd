"""Invariants of job execution that must hold whatever crashed, paused or was delivered twice.

`check_invariants` reads the database and returns the violations it finds; `manage.py
check_invariants` prints them, and the integration tests assert there are none after every
fault they inject. The invariants:

- `job_has_execution`: every submitted job (a job-created event) exists, with its execution.
- `one_success`: at most one SUCCESS attempt per job; a COMPLETED job has exactly one, and a
  job with a SUCCESS attempt is COMPLETED.
- `attempt_numbers`: a job's attempts are numbered 1..n without gaps or duplicates, n is the
  execution's attempt count, and each attempt started no earlier than the one before.
- `live_attempt`: an attempt is RUNNING only while its execution is RUNNING with that attempt's
  event id as the fencing token, and a RUNNING execution has exactly that attempt.
- `lease_rescued`: no DISPATCHED or RUNNING execution holds a lease that expired longer ago than
  one rescue interval plus some slack (or holds no lease at all): lost workers get rescued.
- `dead_letter_once`: exactly one dead-letter event per dead-lettering. A job dead-letters at
  most once per attempt, but an operator's retry can revive it and it can dead-letter again,
  so dead-letterings are counted by attempt number: a FAILED job, and every job-failed event
  that did not retry, needs one dead-letter event for that attempt, whose outcome was FAILURE
  or LOST; no other dead-letter events exist.
- `workflow_order` (§16): a workflow's job is WAITING exactly while a dependency is not
  settled (its node's count is above zero; a cancelled job may have any count), and a job
  that does not ignore failed dependencies started only after every one had COMPLETED.
- `workflow_counts` (§16): a workflow's counts are its jobs' (unfinished, FAILED); it is
  RUNNING exactly while one is unfinished, and a finished one's last WorkflowFinished event
  says its status.
- `key_scope` (§17): an execution's concurrency key is its job's, scoped
  (apps/engine/keys.py): to its owner, or shared (no owner part); an unfinished one's is
  shared exactly when the job has no owner or the key's most specific limit is global, so the
  limits count it as they say.

This module reads the tables of all apps (jobs, executions, attempts, outbox) directly: it is
an auditor that must see the rows as they are stored, not as the services present them. The
dead-letter check relies on a job's outbox rows: retention (apps/scheduler/retention.py) prunes
published events sooner than jobs, so it audits only jobs whose job-created event is still
stored — the oldest event of a job, so its later ones are stored too. A pruned job goes with
all its events, so it leaves nothing behind to check.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import (
    CharField,
    Count,
    Exists,
    F,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    UUIDField,
    Window,
)
from django.db.models.functions import Cast, Lag
from django.utils import timezone

from jobweaver.conf import settings
from jobweaver.core.kafka import JOB_CREATED, JOB_DEAD_LETTER, JOB_FAILED, WORKFLOW_FINISHED
from jobweaver.core.timeutil import iso
from jobweaver.engine import keys
from jobweaver.engine.claim.rules import Limit, shared_by_limits
from jobweaver.executor.models import AttemptOutcome, ExecutionAttempt
from jobweaver.jobs.models import Job
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.models import (
    TERMINAL_STATUSES,
    ConcurrencyLimit,
    ExecutionStatus,
    JobExecution,
)
from jobweaver.workflows.models import Dependency, Node, Workflow, WorkflowStatus

# Beyond one rescue interval: beat's own lateness and the time a rescue batch takes.
DEFAULT_SLACK_SECONDS = 2.0
LIVE_STATUSES = (ExecutionStatus.DISPATCHED, ExecutionStatus.RUNNING)
FAILED_OUTCOMES = (AttemptOutcome.FAILURE, AttemptOutcome.LOST)


@dataclass(frozen=True)
class Violation:
    invariant: str
    job_id: str
    detail: str

    def __str__(self) -> str:
        return f"{self.invariant}: job {self.job_id}: {self.detail}"


def check_invariants(
    *,
    job_ids: Iterable[uuid.UUID | str] | None = None,
    since: datetime | None = None,
    now: datetime | None = None,
    slack_seconds: float = DEFAULT_SLACK_SECONDS,
) -> list[Violation]:
    """Every violation among the jobs in scope: those in `job_ids`, and/or those created at or
    after `since`; all jobs when neither is given.

    Outside a transaction the checks read one REPEATABLE READ snapshot, so an execution and its
    attempts are never seen half-way through a transition that commits while the checker reads.
    """
    scope = _Scope(
        job_ids=[uuid.UUID(str(job_id)) for job_id in job_ids] if job_ids is not None else None,
        since=since,
    )
    now = now or timezone.now()
    if connection.in_atomic_block:  # the caller's transaction decides what is visible
        return _check_all(scope, now=now, slack_seconds=slack_seconds)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        return _check_all(scope, now=now, slack_seconds=slack_seconds)


@dataclass(frozen=True)
class _Scope:
    job_ids: list[uuid.UUID] | None
    since: datetime | None

    def jobs(self) -> QuerySet[Job]:
        jobs = Job.objects.all()
        if self.job_ids is not None:
            jobs = jobs.filter(id__in=self.job_ids)
        if self.since is not None:
            jobs = jobs.filter(created_at__gte=self.since)
        return jobs

    def job_keys(self):
        """The scope's job ids as outbox keys (text), for a subquery."""
        return self.jobs().annotate(key=Cast("id", CharField())).values("key")


def _check_all(scope: _Scope, *, now: datetime, slack_seconds: float) -> list[Violation]:
    executions = list(_executions_with_attempt_counts(scope))
    return [
        *_job_has_execution(scope),
        *_one_success(executions),
        *_attempt_numbers(scope, executions),
        *_live_attempt(executions),
        *_lease_rescued(executions, now=now, slack_seconds=slack_seconds),
        *_dead_letter_once(scope, executions),
        *_workflow_order(scope),
        *_workflow_counts(scope),
        *_key_scope(scope),
    ]


def _executions_with_attempt_counts(scope: _Scope) -> QuerySet[JobExecution]:
    attempts = "job__attempts"
    outcome = f"{attempts}__outcome"
    return (
        JobExecution.objects.filter(job_id__in=scope.jobs().values("id"))
        .annotate(
            recorded=Count(attempts),
            distinct_numbers=Count(f"{attempts}__attempt", distinct=True),
            first_number=Min(f"{attempts}__attempt"),
            last_number=Max(f"{attempts}__attempt"),
            successes=Count(attempts, filter=Q(**{outcome: AttemptOutcome.SUCCESS})),
            running=Count(attempts, filter=Q(**{outcome: AttemptOutcome.RUNNING})),
            running_with_token=Count(
                attempts,
                filter=Q(
                    **{outcome: AttemptOutcome.RUNNING},
                    job__attempts__event_id=F("current_event_id"),
                ),
            ),
        )
        .order_by("job_id")
    )


def _job_has_execution(scope: _Scope) -> list[Violation]:
    violations = [
        Violation("job_has_execution", str(job_id), "the job has no execution")
        for job_id in scope.jobs().filter(execution__isnull=True).values_list("id", flat=True)
    ]
    created = OutboxEvent.objects.filter(topic=JOB_CREATED)
    if scope.job_ids is not None:
        created = created.filter(key__in=[str(job_id) for job_id in scope.job_ids])
    if scope.since is not None:
        created = created.filter(created_at__gte=scope.since)
    missing = created.filter(
        ~Exists(Job.objects.filter(id=Cast(OuterRef("key"), UUIDField())))
    ).values_list("key", flat=True)
    violations += [
        Violation("job_has_execution", key, "a job-created event exists but the job does not")
        for key in missing
    ]
    return violations


def _one_success(executions: list[JobExecution]) -> list[Violation]:
    violations = []
    for execution in executions:
        job_id, successes = str(execution.job_id), execution.successes
        if successes > 1:
            violations.append(Violation("one_success", job_id, f"{successes} SUCCESS attempts"))
        elif execution.status == ExecutionStatus.COMPLETED and successes == 0:
            violations.append(Violation("one_success", job_id, "COMPLETED without a SUCCESS"))
        elif successes and execution.status != ExecutionStatus.COMPLETED:
            violations.append(
                Violation("one_success", job_id, f"{execution.status} after a SUCCESS attempt")
            )
    return violations


def _attempt_numbers(scope: _Scope, executions: list[JobExecution]) -> list[Violation]:
    broken = [
        execution
        for execution in executions
        if execution.recorded != execution.attempt_count
        or (
            execution.recorded
            and (
                execution.first_number != 1
                or execution.last_number != execution.recorded
                or execution.distinct_numbers != execution.recorded
            )
        )
    ]
    numbers: dict[uuid.UUID, list[int]] = {execution.job_id: [] for execution in broken}
    for job_id, number in ExecutionAttempt.objects.filter(job_id__in=list(numbers)).values_list(
        "job_id", "attempt"
    ):
        numbers[job_id].append(number)
    violations = [
        Violation(
            "attempt_numbers",
            str(execution.job_id),
            f"attempts numbered {sorted(numbers[execution.job_id])}, "
            f"the execution counts {execution.attempt_count}",
        )
        for execution in broken
    ]
    out_of_order = (
        ExecutionAttempt.objects.filter(job_id__in=scope.jobs().values("id"))
        .annotate(
            previous_started_at=Window(
                Lag("started_at"), partition_by=[F("job_id")], order_by=F("attempt").asc()
            )
        )
        .filter(previous_started_at__gt=F("started_at"))
        .values_list("job_id", "attempt")
    )
    violations += [
        Violation(
            "attempt_numbers", str(job_id), f"attempt {number} started before its predecessor"
        )
        for job_id, number in out_of_order
    ]
    return violations


def _live_attempt(executions: list[JobExecution]) -> list[Violation]:
    violations = []
    for execution in executions:
        job_id = str(execution.job_id)
        if execution.status == ExecutionStatus.RUNNING:
            if execution.running != 1 or execution.running_with_token != 1:
                violations.append(
                    Violation(
                        "live_attempt",
                        job_id,
                        f"RUNNING with {execution.running} RUNNING attempt(s), "
                        f"{execution.running_with_token} holding the fencing token",
                    )
                )
        elif execution.running:
            violations.append(
                Violation(
                    "live_attempt",
                    job_id,
                    f"{execution.status} but {execution.running} attempt(s) still RUNNING",
                )
            )
    return violations


def _lease_rescued(
    executions: list[JobExecution], *, now: datetime, slack_seconds: float
) -> list[Violation]:
    grace = timedelta(seconds=settings.JOBWEAVER_RESCUE_INTERVAL_SECONDS + slack_seconds)
    violations = []
    for execution in executions:
        if execution.status not in LIVE_STATUSES:
            continue
        lease = execution.lease_expires_at
        if lease is None:
            violations.append(
                Violation("lease_rescued", str(execution.job_id), f"{execution.status}, no lease")
            )
        elif lease < now - grace:
            overdue = (now - lease).total_seconds()
            violations.append(
                Violation(
                    "lease_rescued",
                    str(execution.job_id),
                    f"{execution.status} with a lease that expired at {iso(lease)}, "
                    f"{overdue:.1f} s ago (rescue interval "
                    f"{settings.JOBWEAVER_RESCUE_INTERVAL_SECONDS:g} s)",
                )
            )
    return violations


def _dead_letter_once(scope: _Scope, executions: list[JobExecution]) -> list[Violation]:
    events = OutboxEvent.objects.filter(key__in=scope.job_keys())
    dead_letters = Counter(
        (key, attempt)
        for key, attempt in events.filter(topic=JOB_DEAD_LETTER).values_list(
            "key", "payload__attempts"
        )
    )
    # Each dead-lettering: a FAILED execution's last attempt, and any failure that was not
    # retried (it may have been revived by an operator's retry since).
    # Jobs whose events were pruned by retention are not audited (see the module docstring).
    with_history = set(events.filter(topic=JOB_CREATED).values_list("key", flat=True))
    dead_letterings = {
        (str(execution.job_id), execution.attempt_count)
        for execution in executions
        if execution.status == ExecutionStatus.FAILED and str(execution.job_id) in with_history
    }
    dead_letterings |= {
        (key, attempt)
        for key, attempt in events.filter(topic=JOB_FAILED, payload__willRetry=False).values_list(
            "key", "payload__attempt"
        )
        if key in with_history
    }
    failed_attempts = set(
        ExecutionAttempt.objects.filter(
            job_id__in=list({uuid.UUID(key) for key, _ in dead_letters}),
            outcome__in=FAILED_OUTCOMES,
        ).values_list("job_id", "attempt")
    )
    violations = []
    for (key, attempt), count in sorted(dead_letters.items(), key=str):
        if count > 1:
            violations.append(
                Violation(
                    "dead_letter_once", key, f"{count} dead-letter events for attempt {attempt}"
                )
            )
        if (uuid.UUID(key), attempt) not in failed_attempts:
            violations.append(
                Violation(
                    "dead_letter_once",
                    key,
                    f"a dead-letter event for attempt {attempt}, which did not fail",
                )
            )
    for key, attempt in sorted(dead_letterings - set(dead_letters), key=str):
        violations.append(
            Violation(
                "dead_letter_once", key, f"dead-lettered at attempt {attempt} without an event"
            )
        )
    return violations


def _workflow_order(scope: _Scope) -> list[Violation]:
    nodes = {
        node.job_id: node
        for node in Node.objects.filter(job__in=scope.jobs()).select_related("job__execution")
    }
    if not nodes:
        return []
    violations = []
    edges = Dependency.objects.filter(job_id__in=nodes).values_list("job_id", "depends_on_id")
    parents: dict[uuid.UUID, list[uuid.UUID]] = {}
    for child, parent in edges:
        parents.setdefault(child, []).append(parent)
    parent_rows = {
        e.job_id: e
        for e in JobExecution.objects.filter(job_id__in={p for ps in parents.values() for p in ps})
    }
    first_start = dict(
        ExecutionAttempt.objects.filter(job_id__in=nodes)
        .values("job_id")
        .annotate(first=Min("started_at"))
        .values_list("job_id", "first")
    )
    for job_id, node in nodes.items():
        status = node.job.execution.status
        waits = status == ExecutionStatus.WAITING
        if (waits and node.waiting_on == 0) or (
            not waits and node.waiting_on > 0 and status != ExecutionStatus.CANCELLED
        ):
            violations.append(
                Violation(
                    "workflow_order",
                    str(job_id),
                    f"{status} with {node.waiting_on} dependencies not settled",
                )
            )
        started = first_start.get(job_id)
        for parent in parents.get(job_id, []):
            row = parent_rows[parent]
            # A dependency a tolerant job ignored may be retried after that job ran.
            if started is None or node.ignore_failed_dependencies:
                continue
            finished = row.finished_at
            if finished is not None and row.status in TERMINAL_STATUSES and started < finished:
                violations.append(
                    Violation(
                        "workflow_order",
                        str(job_id),
                        f"started {iso(started)}, before its dependency {parent} finished "
                        f"{iso(finished)}",
                    )
                )
            if row.status != ExecutionStatus.COMPLETED:
                violations.append(
                    Violation(
                        "workflow_order",
                        str(job_id),
                        f"ran although its dependency {parent} is {row.status}",
                    )
                )
    return violations


def _workflow_counts(scope: _Scope) -> list[Violation]:
    workflows = Workflow.objects.filter(nodes__job__in=scope.jobs()).distinct()
    violations = []
    for workflow in workflows:
        counts = Counter(
            JobExecution.objects.filter(job__workflow_node__workflow=workflow).values_list(
                "status", flat=True
            )
        )
        unfinished = sum(n for status, n in counts.items() if status not in TERMINAL_STATUSES)
        failed = counts.get(ExecutionStatus.FAILED, 0)
        problems = []
        if (workflow.unfinished, workflow.failed) != (unfinished, failed):
            problems.append(
                f"counts unfinished {workflow.unfinished}, failed {workflow.failed}; its jobs "
                f"say {unfinished}, {failed}"
            )
        if (workflow.status == WorkflowStatus.RUNNING) != (unfinished > 0):
            problems.append(f"{workflow.status} with {unfinished} jobs unfinished")
        if workflow.status != WorkflowStatus.RUNNING:
            last = (
                OutboxEvent.objects.filter(topic=WORKFLOW_FINISHED, key=str(workflow.id))
                .order_by("-created_at")
                .values_list("payload", flat=True)
                .first()
            )
            if last is None or last.get("status") != workflow.status:
                problems.append(f"{workflow.status}, but its last WorkflowFinished is {last}")
        violations += [
            Violation("workflow_counts", f"(workflow {workflow.id})", problem)
            for problem in problems
        ]
    return violations


def _key_scope(scope: _Scope) -> list[Violation]:
    limits = [
        Limit(pattern, None, None, is_global)
        for pattern, is_global in ConcurrencyLimit.objects.values_list("pattern", "is_global")
    ]
    keyed = (
        JobExecution.objects.filter(job_id__in=scope.jobs().values("id"))
        .filter(Q(concurrency_key__isnull=False) | Q(job__concurrency_key__isnull=False))
        .values_list(
            "job_id", "status", "concurrency_key", "submitted_by_id", "job__concurrency_key"
        )
        .order_by("job_id")
    )
    return [
        Violation("key_scope", str(job_id), problem)
        for job_id, *row in keyed
        if (problem := _key_problem(*row, limits=limits)) is not None
    ]


def _key_problem(status, stored, owner_id, key, *, limits: list[Limit]) -> str | None:
    if stored is None or key is None or keys.user_key(stored) != key:
        return f"key {stored!r}, its job's {key!r}"
    if owner_id is None:
        # No owner (shared), or a deleted one, whose jobs keep the owner part they had.
        return None
    if stored.partition(keys.SEPARATOR)[0] not in ("", str(owner_id)):
        return f"key {stored!r} of owner {owner_id}"
    if status in TERMINAL_STATUSES:
        return None  # keeps the form it ran with until an operator retries it
    shared = shared_by_limits(key, limits)
    if keys.is_shared(stored) != shared:
        should = "shared" if shared else "its owner's"
        return f"{status} with key {stored!r}: the limits make it {should}"
    return None
