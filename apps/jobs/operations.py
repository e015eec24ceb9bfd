"""The operator's writes, from the admin, the cockpit and `manage.py jobs`: one action over
many jobs, and discarding dead letters. Each job is acted on through the same service as the
API and the CLI, in its own transaction, so one job in the wrong state skips only itself and
says why."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.db import OperationalError, transaction

from jobweaver.core.db import lock_timed_out
from jobweaver.core.errors import InvalidStateTransition, JobNotFound
from jobweaver.jobs.models import DeadLetterDiscard, Job
from jobweaver.jobs.selectors import is_discarded, may_operate, parse_job_id
from jobweaver.jobs.services import job_cancel, job_retry, job_run_now
from jobweaver.scheduler.models import ExecutionStatus, JobExecution


@transaction.atomic
def dead_letter_discard(*, job_id: str | uuid.UUID, user=None) -> DeadLetterDiscard:
    """Record that a dead-lettered (FAILED) job needs nothing more: it leaves the dead-letter
    desk and keeps its state and history. Locks the execution so a concurrent retry either
    comes first (and the job is no longer FAILED) or after (and the job leaves FAILED)."""
    parsed = parse_job_id(job_id)
    execution = JobExecution.objects.select_for_update().filter(job_id=parsed).first()
    if execution is None:
        raise JobNotFound(f"Job {parsed} not found", job_id=parsed)
    if execution.status != ExecutionStatus.FAILED:
        raise InvalidStateTransition(
            f"Job {parsed} is {execution.status}; only dead-lettered (FAILED) jobs can be "
            "discarded",
            job_id=parsed,
        )
    if is_discarded(job_id=parsed, finished_at=execution.finished_at):
        raise InvalidStateTransition(f"Job {parsed} is already discarded", job_id=parsed)
    return DeadLetterDiscard.objects.create(
        job_id=parsed, discarded_by=user, final_error=execution.last_error
    )


@dataclass(frozen=True)
class BulkAction:
    name: str
    verb: str  # past tense, for the report: "retried"
    label: str  # for buttons and confirmation pages
    applies_to: str  # which jobs it is for, said to the operator
    done: str  # the report's success line; {jobs} stands for "N job(s)"


BULK_ACTIONS: dict[str, BulkAction] = {
    action.name: action
    for action in (
        BulkAction("retry", "retried", "Retry", "FAILED or CANCELLED jobs", "Retried {jobs}."),
        BulkAction(
            "cancel",
            "cancelled",
            "Cancel",
            "PENDING, DISPATCHED or RUNNING jobs",
            "Cancelled {jobs}; a running job stops at its next checkpoint.",
        ),
        BulkAction(
            "run_now", "made due now", "Run now", "delayed PENDING jobs", "Made {jobs} due now."
        ),
        BulkAction(
            "discard",
            "discarded",
            "Discard",
            "dead-lettered (FAILED) jobs",
            "Discarded {jobs}; they stay FAILED with their history.",
        ),
    )
}


@dataclass
class BulkReport:
    """What one bulk action did: the jobs done, and the skipped ones grouped by reason."""

    action: BulkAction
    done: list[uuid.UUID] = field(default_factory=list)
    skipped: dict[str, list[uuid.UUID]] = field(default_factory=dict)

    @property
    def skipped_count(self) -> int:
        return sum(len(ids) for ids in self.skipped.values())

    def summary(self) -> str:
        """One line with the counts, for the admin log and the command line."""
        line = f"{self.action.label}: {len(self.done)} {self.action.verb}"
        if self.skipped:
            reasons = ", ".join(f"{len(ids)} {reason}" for reason, ids in self.skipped.items())
            line += f", {self.skipped_count} skipped ({reasons})"
        return line


NOT_YOURS_REASON = "another user's job: acting on it needs jobweaver_jobs.operate_all_jobs"
BUSY_REASON = (
    "job was busy: its row stayed locked by concurrent work longer than the lock timeout; "
    "nothing was changed, try again"
)


def _reason(error: InvalidStateTransition | JobNotFound, job_id: uuid.UUID) -> str:
    # "Job <id> is COMPLETED; ..." -> "job is COMPLETED; ...": jobs with one reason group.
    return error.message.replace(f"Job {job_id}", "job")


def _operation(action: str, user) -> Callable[..., object]:
    if action == "discard":
        return lambda *, job_id: dead_letter_discard(job_id=job_id, user=user)
    return {"retry": job_retry, "cancel": job_cancel, "run_now": job_run_now}[action]


def jobs_bulk_apply(*, action: str, job_ids: Iterable[uuid.UUID], user=None) -> BulkReport:
    """Apply `action` (a key of BULK_ACTIONS) to each job, each in its own transaction, through
    the job services the API and the CLI use. Never raises for a job in the wrong state, a
    job that vanished or a job whose row stayed locked past the lock timeout: those are
    reported as skipped, grouped by reason."""
    report = BulkReport(BULK_ACTIONS[action])
    operation = _operation(action, user)
    job_ids = list(job_ids)
    owners = dict(Job.objects.filter(id__in=job_ids).values_list("id", "submitted_by_id"))
    for job_id in job_ids:
        if job_id in owners and not may_operate(user, owners[job_id]):
            report.skipped.setdefault(NOT_YOURS_REASON, []).append(job_id)
            continue
        try:
            operation(job_id=job_id)
        except (InvalidStateTransition, JobNotFound) as error:
            report.skipped.setdefault(_reason(error, job_id), []).append(job_id)
        except OperationalError as error:
            # Its row was held by concurrent work (a dispatch, an attempt's end) for longer
            # than the lock timeout: this job's transaction rolled back; the others go on.
            if not lock_timed_out(error):
                raise
            report.skipped.setdefault(BUSY_REASON, []).append(job_id)
        else:
            report.done.append(job_id)
    return report
