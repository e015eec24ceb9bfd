"""JSON shapes of jobs and attempts (camelCase, like the seeds; ARCHITECTURE §8), shared by the
API and the command line."""

from __future__ import annotations

from django.core.exceptions import ObjectDoesNotExist

from jobweaver.core.timeutil import iso
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.kinds import kind_of
from jobweaver.jobs.models import Job
from jobweaver.scheduler.models import ExecutionStatus


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


def job_to_dict(
    job: Job,
    attempts: list[ExecutionAttempt],
    *,
    tracebacks: bool = True,
    depends_on: list | tuple = (),
) -> dict:
    """The job detail; without `tracebacks`, a TASK attempt's traceback is left out (null):
    it is the server's code, shown to operators only (ARCHITECTURE §17). `depends_on`: the
    ids of the jobs it waits for in its workflow (§16)."""
    execution = job.execution
    kind = kind_of(job)
    latest = attempts[-1] if attempts else None
    total_steps = kind.total_steps(job, latest)
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
        "attempts": [attempt_to_dict(a) | kind.attempt_detail(a) for a in attempts],
        "queueName": job.queue_name,
        "concurrencyKey": job.concurrency_key,
        "workflowId": _workflow_id(job),
        "dependsOn": [str(parent) for parent in depends_on],
    }
    detail.update(kind.job_detail(execution, attempts))  # e.g. a TASK's result
    if not tracebacks:
        for attempt in detail["attempts"]:
            if attempt.get("traceback") is not None:
                attempt["traceback"] = None
    return detail


def _workflow_id(job: Job) -> str | None:
    try:
        return str(job.workflow_node.workflow_id)
    except ObjectDoesNotExist:
        return None
