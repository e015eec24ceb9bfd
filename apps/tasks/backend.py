"""`JobWeaverBackend`: Django's Tasks framework (DEP 14) over JobWeaver (ARCHITECTURE §13).

    TASKS = {"default": {"BACKEND": "apps.tasks.backend.JobWeaverBackend"}}

`enqueue` turns a task call into a TASK job through `job_submit`, the submission path of the
API and the CLI: one Job row, its PENDING execution and its JobCreated event, written in the
caller's transaction (a rollback leaves nothing), dispatched once that transaction commits.
`run_after` becomes the job's runAt, the DEP 14 priority (-100 … 100) is mapped onto ours
(apps/tasks/priority.py), `queue_name` is recorded. From then on the job is like any other:
leases, retries with backoff, the dead-letter queue, cancellation, history.

`get_result` reads our tables: the execution's status, the attempts (worker ids, the exception
of each failed one) and the return value recorded with the SUCCESS attempt.

Per-task options where DEP 14 leaves room (the `task_class` below): `max_retries`,
`timeout_seconds` and `idempotency_key`, given to `@task(...)` or to `.with_options(...)`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.version import PY311

from apps.core.errors import InvalidRequest, JobNotFound
from apps.executor.models import AttemptOutcome, ExecutionAttempt
from apps.executor.selectors import attempts_for_jobs
from apps.jobs.kinds import TASK, kind_of
from apps.jobs.models import Job
from apps.jobs.selectors import job_get
from apps.jobs.services import MAX_IDEMPOTENCY_KEY_CHARS, job_submit
from apps.jobs.validation import JobSpec
from apps.scheduler.models import ExecutionStatus
from apps.tasks import priority
from apps.tasks.compat import (
    BaseTaskBackend,
    InvalidTaskError,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_backends,
    task_enqueued,
)
from apps.tasks.exceptions import AttemptLost, TaskCancelled
from apps.tasks.payload import validate_task_payload
from apps.tasks.registry import registry_get

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


@dataclass(frozen=True, slots=PY311, kw_only=True)
class JobWeaverTask(Task):
    """A DEP 14 task with JobWeaver's per-task options (None: the job defaults)."""

    max_retries: int | None = None
    """Retries after the first attempt (maxRetryCount)."""
    timeout_seconds: int | None = None
    """An attempt that runs longer fails "timed out" (timeoutSeconds)."""
    idempotency_key: str | None = None
    """Enqueueing again with the same key and the same arguments returns the first job."""

    def with_options(
        self,
        *,
        max_retries: int | None = None,
        timeout_seconds: int | None = None,
        idempotency_key: str | None = None,
    ) -> JobWeaverTask:
        """A copy with these options set, like DEP 14's `using()` for its own options."""
        changes = {
            name: value
            for name, value in (
                ("max_retries", max_retries),
                ("timeout_seconds", timeout_seconds),
                ("idempotency_key", idempotency_key),
            )
            if value is not None
        }
        return replace(self, **changes)


class JobWeaverBackend(BaseTaskBackend):
    task_class = JobWeaverTask

    supports_defer = True
    supports_get_result = True
    supports_priority = True
    # The runner calls the function in a thread of its own (apps/executor/task_runner.py);
    # coroutines would need an event loop there, which nothing needs yet.
    supports_async_task = False

    def validate_task(self, task: Task) -> None:
        super().validate_task(task)
        max_retries = getattr(task, "max_retries", None)
        if max_retries is not None and not 0 <= max_retries <= settings.JOBWEAVER_MAX_RETRY_COUNT:
            raise InvalidTaskError(
                f"max_retries must be between 0 and {settings.JOBWEAVER_MAX_RETRY_COUNT}."
            )
        timeout = getattr(task, "timeout_seconds", None)
        if timeout is not None and not 1 <= timeout <= settings.JOBWEAVER_MAX_TIMEOUT_SECONDS:
            raise InvalidTaskError(
                f"timeout_seconds must be between 1 and {settings.JOBWEAVER_MAX_TIMEOUT_SECONDS}."
            )
        key = getattr(task, "idempotency_key", None)
        if key is not None and not 0 < len(key) <= MAX_IDEMPOTENCY_KEY_CHARS:
            raise InvalidTaskError(
                f"idempotency_key must be 1-{MAX_IDEMPOTENCY_KEY_CHARS} characters."
            )

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Write the TASK job in the caller's transaction; it is dispatched after commit, and
        `task_enqueued` is sent then (a rolled-back enqueue announces nothing)."""
        self.validate_task(task)
        path = task.module_path
        if registry_get(path) is None:
            raise InvalidTaskError(
                f"Task {path} is not registered: define it in the tasks module of an installed app."
            )
        try:
            payload = validate_task_payload({"task": path, "args": args, "kwargs": kwargs})
        except InvalidRequest as exc:
            raise InvalidTaskError(exc.message) from None
        spec = JobSpec(
            job_type=TASK.name,
            steps=[],
            task=payload,
            max_retries=_option(task, "max_retries", settings.JOBWEAVER_DEFAULT_MAX_RETRY_COUNT),
            priority=priority.to_jobweaver(task.priority),
            task_priority=task.priority,
            queue_name=task.queue_name,
            run_at=task.run_after,
            timeout_seconds=_option(
                task, "timeout_seconds", settings.JOBWEAVER_DEFAULT_TIMEOUT_SECONDS
            ),
        )
        submitted = job_submit(spec=spec, idempotency_key=getattr(task, "idempotency_key", None))
        if submitted.created:
            result = self._result(submitted.job, [], task=task)
        else:  # an idempotent replay: the first job, as it is now
            result = self.get_result(str(submitted.job.id))
        transaction.on_commit(lambda: task_enqueued.send(type(self), task_result=result))
        return result

    def get_result(self, result_id: str) -> TaskResult:
        """The TaskResult of TASK job `result_id` (its job id), read from our tables."""
        try:
            job = job_get(job_id=str(result_id))
        except JobNotFound:
            raise TaskResultDoesNotExist(result_id) from None
        if kind_of(job) is not TASK:
            raise TaskResultDoesNotExist(result_id)
        return self._result(job, attempts_for_jobs(job_ids=[job.id])[job.id])

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
        return replace(
            registered,
            priority=task_priority,
            queue_name=job.queue_name,
            run_after=job.run_at,
            backend=self.alias,
        )


FINISHED = {TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED}


def jobweaver_backend() -> JobWeaverBackend:
    """The configured JobWeaverBackend (settings.TASKS) that runs and reports TASK jobs."""
    for backend in task_backends.all():
        if isinstance(backend, JobWeaverBackend):
            return backend
    raise InvalidTaskError("settings.TASKS configures no JobWeaverBackend")


def _option(task: Task, name: str, default: int) -> int:
    value = getattr(task, name, None)
    return default if value is None else value


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
