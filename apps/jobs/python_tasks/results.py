"""A TASK job as DEP 14 reports it: the reading half of JobWeaver's Tasks backend.

The executor's task runner builds a `TaskResult` for a task's context and for the
`task_started` / `task_finished` signals; the backend (apps/tasks/backend.py, the face that
enqueues) answers `get_result` with the same mapping. Both live on this base class so the
runtime never imports the face.
"""

from __future__ import annotations

import copy

from jobweaver.executor.models import AttemptOutcome, ExecutionAttempt
from jobweaver.jobs.models import Job
from jobweaver.jobs.python_tasks import priority
from jobweaver.jobs.python_tasks.compat import (
    BaseTaskBackend,
    InvalidTaskError,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
)
from jobweaver.jobs.python_tasks.exceptions import AttemptLost, TaskCancelled
from jobweaver.jobs.python_tasks.registry import registry_get
from jobweaver.scheduler.models import ExecutionStatus

STATUS_OF_EXECUTION = {
    ExecutionStatus.PENDING: TaskResultStatus.READY,  # new, or waiting for its next retry
    ExecutionStatus.DISPATCHED: TaskResultStatus.READY,  # sent to an executor, not started
    ExecutionStatus.RUNNING: TaskResultStatus.RUNNING,
    ExecutionStatus.COMPLETED: TaskResultStatus.SUCCESSFUL,
    ExecutionStatus.FAILED: TaskResultStatus.FAILED,  # dead-lettered
    ExecutionStatus.CANCELLED: TaskResultStatus.FAILED,  # DEP 14 has no "cancelled"
}
# Attempts that did not end by raising: the exception class their TaskError names.
ERROR_OF_OUTCOME = {
    AttemptOutcome.LOST: AttemptLost,
    AttemptOutcome.CANCELLED: TaskCancelled,
}


def _class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


class TaskResultsBackend(BaseTaskBackend):
    """A Tasks backend that reads TASK jobs as TaskResults (JobWeaverBackend adds `enqueue`)."""

    def result_for_job(self, job: Job, attempts: list[ExecutionAttempt]) -> TaskResult:
        """The TaskResult of a TASK job already read (with its execution) and its attempts."""
        return self._result(job, attempts)

    def _result(
        self, job: Job, attempts: list[ExecutionAttempt], *, task: Task | None = None
    ) -> TaskResult:
        if task is None:
            task = self._task_of(job)
        execution = job.execution
        status = STATUS_OF_EXECUTION[ExecutionStatus(execution.status)]
        result = TaskResult(
            task=task,
            id=str(job.id),
            status=status,
            enqueued_at=job.created_at,
            started_at=attempts[0].started_at if attempts else None,
            last_attempted_at=attempts[-1].started_at if attempts else None,
            finished_at=execution.finished_at if status in FINISHED else None,
            args=job.instruction.get("args", []),
            kwargs=job.instruction.get("kwargs", {}),
            backend=self.alias,
            errors=_errors(execution.status, attempts),
            worker_ids=[attempt.worker_id for attempt in attempts],
        )
        if status == TaskResultStatus.SUCCESSFUL:
            succeeded = [a for a in attempts if a.outcome == AttemptOutcome.SUCCESS]
            value = succeeded[-1].result if succeeded else None
            object.__setattr__(result, "_return_value", value)
        return result

    def _task_of(self, job: Job) -> Task:
        """The registered task of a job, with the queue, priority and run_after of the job."""
        path = job.instruction.get("task", "")
        registered = registry_get(path)
        if registered is None:
            raise TaskResultDoesNotExist(f"{job.id}: task {path!r} is not registered here")
        task_priority = job.task_priority
        if task_priority is None:  # submitted through the API or the CLI
            task_priority = priority.from_jobweaver(job.priority)
        # Not `dataclasses.replace`: it validates the copy against today's TASKS (its QUEUES),
        # and a stored job must run and read back whatever the declarations now allow (§13a).
        task = copy.copy(registered)
        for name, value in (
            ("priority", task_priority),
            ("queue_name", job.queue_name),
            ("run_after", job.run_at),
            ("backend", self.alias),
        ):
            object.__setattr__(task, name, value)
        return task


FINISHED = {TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED}


def jobweaver_backend() -> TaskResultsBackend:
    """The configured JobWeaverBackend (settings.TASKS) that runs and reports TASK jobs."""
    for backend in task_backends.all():
        if isinstance(backend, TaskResultsBackend):
            return backend
    raise InvalidTaskError("settings.TASKS configures no JobWeaverBackend")


def _errors(status: str, attempts: list[ExecutionAttempt]) -> list[TaskError]:
    """One TaskError per attempt that did not succeed, oldest first; a job cancelled before it
    ever ran gets one too, so a FAILED result always says why."""
    errors = []
    for attempt in attempts:
        if attempt.outcome == AttemptOutcome.FAILURE:
            path = attempt.exception_type or _class_path(RuntimeError)
        elif attempt.outcome in ERROR_OF_OUTCOME:
            path = _class_path(ERROR_OF_OUTCOME[attempt.outcome])
        else:
            continue
        errors.append(
            TaskError(
                exception_class_path=path,
                traceback=attempt.traceback or f"{path}: {attempt.error_message}\n",
            )
        )
    if status == ExecutionStatus.CANCELLED and not any(
        a.outcome == AttemptOutcome.CANCELLED for a in attempts
    ):
        path = _class_path(TaskCancelled)
        errors.append(TaskError(exception_class_path=path, traceback=f"{path}: cancelled\n"))
    return errors
