"""JSON shapes of jobs and attempts (camelCase, like the seeds; ARCHITECTURE §8), shared by the
API and the command line."""

from __future__ import annotations

from apps.core.timeutil import iso
from apps.executor.models import AttemptOutcome, ExecutionAttempt
from apps.jobs.models import Job, JobType
from apps.scheduler.models import ExecutionStatus


def attempt_to_dict(attempt: ExecutionAttempt) -> dict:
    return {
        "eventId": str(attempt.event_id),
        "attempt": attempt.attempt,
        "workerId": attempt.worker_id,
        "startedAt": iso(attempt.started_at),
        "finishedAt": iso(attempt.finished_at),
        "outcome": attempt.outcome,
        "errorMessage": attempt.error_message or None,
        "stepsCompleted": attempt.steps_completed,
    }


def task_attempt_to_dict(attempt: ExecutionAttempt) -> dict:
    """An attempt of a TASK job (§13): the fields of §8, plus its exception and result."""
    return {
        **attempt_to_dict(attempt),
        "exceptionType": attempt.exception_type or None,
        "traceback": attempt.traceback or None,
        "result": attempt.result,
    }


def job_to_dict(job: Job, attempts: list[ExecutionAttempt]) -> dict:
    execution = job.execution
    is_task = job.job_type == JobType.TASK
    latest = attempts[-1] if attempts else None
    # A task reports its own progress (context.report_progress); steps are simulation's.
    total_steps = (latest.total_steps if latest else 0) if is_task else len(job.steps)
    steps_completed = latest.steps_completed if latest else 0
    is_pending = execution.status == ExecutionStatus.PENDING  # nextRunAt means nothing otherwise
    if execution.status == ExecutionStatus.COMPLETED:
        steps_completed = total_steps
    detail = {
        "jobId": str(job.id),
        "jobType": job.job_type,
        "status": execution.status,
        "payload": job.instruction,
        "priority": job.priority,
        "maxRetryCount": execution.max_retries,
        "retryCount": execution.retry_count,
        "nextRunAt": iso(execution.next_run_at) if is_pending else None,
        "lastError": execution.last_error or None,
        "traceId": job.trace_id,
        "createdAt": iso(job.created_at),
        "updatedAt": iso(max(job.updated_at, execution.updated_at)),
        "startedAt": iso(execution.started_at),
        "finishedAt": iso(execution.finished_at),
        "progress": {"stepsCompleted": steps_completed, "totalSteps": total_steps},
        "attempts": [(task_attempt_to_dict if is_task else attempt_to_dict)(a) for a in attempts],
        "queueName": job.queue_name,
        "concurrencyKey": job.concurrency_key,
    }
    if is_task:
        # The return value of the attempt that succeeded; null until the job COMPLETED.
        succeeded = [a for a in attempts if a.outcome == AttemptOutcome.SUCCESS]
        completed = execution.status == ExecutionStatus.COMPLETED and succeeded
        detail["result"] = succeeded[-1].result if completed else None
    return detail
