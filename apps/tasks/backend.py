"""`JobWeaverBackend`: Django's Tasks framework (DEP 14) over JobWeaver (ARCHITECTURE §13).

    TASKS = {"default": {"BACKEND": "jobweaver.tasks.backend.JobWeaverBackend"}}

`enqueue` turns a task call into a TASK job through `job_submit`, the submission path of the
API and the CLI: one Job row, its PENDING execution and its JobCreated event, written in the
caller's transaction (a rollback leaves nothing), dispatched once that transaction commits.
`run_after` becomes the job's runAt, the DEP 14 priority (-100 … 100) is mapped onto ours
(apps/jobs/python_tasks/priority.py), `queue_name` is recorded. From then on the job is like any
other: leases, retries with backoff, the dead-letter queue, cancellation, history.

`get_result` reads our tables: the execution's status, the attempts (worker ids, the exception
of each failed one) and the return value recorded with the SUCCESS attempt, mapped by the base
class the executor shares (apps/jobs/python_tasks/results.py).

Per-task options where DEP 14 leaves room (the `task_class` below, ARCHITECTURE §13a): retries
and their policy, timeouts, idempotency, unique and concurrency keys, given to
`jobweaver.tasks.task(...)` or to `.with_options(...)`, and stored on the job.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.db import transaction
from django.utils.version import PY311

from jobweaver.conf import settings
from jobweaver.core.authority import bound_user
from jobweaver.core.errors import InvalidRequest, JobNotFound
from jobweaver.core.names import checked_queue_name
from jobweaver.jobs.kinds import TASK, kind_of
from jobweaver.jobs.python_tasks import priority
from jobweaver.jobs.python_tasks.compat import (
    InvalidTaskError,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    task_enqueued,
)
from jobweaver.jobs.python_tasks.options import call_keys, check_task_options
from jobweaver.jobs.python_tasks.payload import validate_task_payload
from jobweaver.jobs.python_tasks.registry import registry_get
from jobweaver.jobs.python_tasks.results import TaskResultsBackend
from jobweaver.jobs.selectors import attempts_for_jobs, job_get
from jobweaver.jobs.services import MAX_IDEMPOTENCY_KEY_CHARS, job_submit
from jobweaver.jobs.validation import JobSpec
from jobweaver.workflows.canvas import Signature


@dataclass(frozen=True, slots=PY311, kw_only=True)
class JobWeaverTask(Task):
    """A DEP 14 task with JobWeaver's per-task options (None: the job defaults), ARCHITECTURE
    §13a. Declared with `jobweaver.tasks.task(...)`, changed per call with `with_options`."""

    max_retries: int | None = None
    """Retries after the first attempt (maxRetryCount)."""
    timeout_seconds: int | None = None
    """An attempt that runs longer fails "timed out" (timeoutSeconds)."""
    hard_timeout_seconds: int | None = None
    """The process pool kills an attempt still running then (default: timeout + grace)."""
    idempotency_key: str | None = None
    """Enqueueing again with the same key and the same arguments returns the first job."""
    retry_on: tuple[str, ...] | None = None
    """Only exceptions of these classes (paths) are retried; any other dead-letters at once."""
    retry_backoff: tuple[float, float] | None = None
    """The task's own backoff: (base, cap) seconds, times JOBWEAVER_BACKOFF_SCALE."""
    retry_jitter: float | None = None
    """The task's own jitter, a fraction of the delay."""
    concurrency_key: str | None = None
    """A key formatted with the call's kwargs ("customer-{customer_id}"): its limits apply."""
    unique_key: str | None = None
    """A key formatted with the call's kwargs: while a job with it is active, enqueueing
    another returns that job."""

    def s(self, *args, **kwargs) -> Signature:
        """A signature for a workflow (§16): in a chain it gets its parent's return value as
        its first argument, after a group the group's values as a list (Celery's rules)."""
        return Signature(self, args, kwargs)

    def si(self, *args, **kwargs) -> Signature:
        """An immutable signature: it gets no parent's value."""
        return Signature(self, args, kwargs, immutable=True)

    def with_options(self, **options) -> JobWeaverTask:
        """A copy with these options set (None leaves one as it is): JobWeaver's own, and
        DEP 14's `priority`, `queue_name` and `run_after` (as `using()` sets them)."""
        unknown = sorted(set(options) - set(OPTION_NAMES) - {"priority", "queue_name", "run_after"})
        if unknown:
            raise TypeError(f"with_options() got unknown option(s): {', '.join(unknown)}")
        changes = {name: value for name, value in options.items() if value is not None}
        if "retry_on" in changes:
            changes["retry_on"] = exception_paths(changes["retry_on"])
        if "retry_backoff" in changes:
            changes["retry_backoff"] = tuple(changes["retry_backoff"])
        return replace(self, **changes)


OPTION_NAMES = (
    "max_retries",
    "timeout_seconds",
    "hard_timeout_seconds",
    "idempotency_key",
    "retry_on",
    "retry_backoff",
    "retry_jitter",
    "concurrency_key",
    "unique_key",
)


def exception_paths(classes) -> tuple[str, ...]:
    """`retry_on` as stored: each exception class (or its path) as a class path."""
    if isinstance(classes, (str, type)):
        classes = (classes,)
    return tuple(
        item if isinstance(item, str) else f"{item.__module__}.{item.__qualname__}"
        for item in classes
    )


class JobWeaverBackend(TaskResultsBackend):
    task_class = JobWeaverTask

    def __init__(self, alias: str, params: dict) -> None:
        super().__init__(alias, params)
        # DEP 14 restricts queue names to QUEUES, ["default"] when not given. JobWeaver routes
        # by queue (ARCHITECTURE §15): without QUEUES every valid queue name is accepted; a
        # QUEUES list, when given, restricts declarations only, never a stored job.
        if "QUEUES" not in params:
            self.queues = set()

    supports_defer = True
    supports_get_result = True
    supports_priority = True
    # Coroutines run on the executor's event loop (apps/executor/task_runner.py).
    supports_async_task = True

    def validate_task(self, task: Task) -> None:
        super().validate_task(task)
        try:
            checked_queue_name(task.queue_name, "queue_name")
        except InvalidRequest as exc:
            raise InvalidTaskError(exc.message) from None
        max_retries = getattr(task, "max_retries", None)
        if max_retries is not None and not 0 <= max_retries <= settings.JOBWEAVER_MAX_RETRY_COUNT:
            raise InvalidTaskError(
                f"max_retries must be between 0 and {settings.JOBWEAVER_MAX_RETRY_COUNT}."
            )
        timeout = getattr(task, "timeout_seconds", None)
        most = settings.JOBWEAVER_MAX_TASK_TIMEOUT_SECONDS
        if timeout is not None and not 1 <= timeout <= most:
            raise InvalidTaskError(f"timeout_seconds must be between 1 and {most}.")
        key = getattr(task, "idempotency_key", None)
        if key is not None and not 0 < len(key) <= MAX_IDEMPOTENCY_KEY_CHARS:
            raise InvalidTaskError(
                f"idempotency_key must be 1-{MAX_IDEMPOTENCY_KEY_CHARS} characters."
            )
        if isinstance(task, JobWeaverTask):
            try:
                check_task_options(task)
            except InvalidRequest as exc:
                raise InvalidTaskError(exc.message) from None

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Write the TASK job in the caller's transaction; it is dispatched after commit, and
        `task_enqueued` is sent then (a rolled-back enqueue announces nothing)."""
        spec = self.job_spec(task, args, kwargs)
        submitted = job_submit(spec=spec, idempotency_key=getattr(task, "idempotency_key", None))
        if submitted.created:
            result = self._result(submitted.job, [], task=task)
        else:  # an idempotent replay: the first job, as it is now (the enqueuer's authority)
            result = self._read(str(submitted.job.id), user=None)
        transaction.on_commit(lambda: task_enqueued.send(type(self), task_result=result))
        return result

    def job_spec(self, task: Task, args: Any, kwargs: Any) -> JobSpec:
        """The validated TASK job of a call (InvalidTaskError otherwise): what `enqueue`
        submits, and what a workflow (apps/workflows/canvas.py) puts in its graph."""
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
        try:
            keys = call_keys(task, kwargs)
        except InvalidRequest as exc:
            raise InvalidTaskError(exc.message) from None
        return JobSpec(
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
            hard_timeout_seconds=getattr(task, "hard_timeout_seconds", None),
            retry_on=getattr(task, "retry_on", None),
            retry_backoff=getattr(task, "retry_backoff", None),
            retry_jitter=getattr(task, "retry_jitter", None),
            **keys,
        )

    def get_result(self, result_id: str) -> TaskResult:
        """The TaskResult of TASK job `result_id` (its job id), read from our tables: with the
        server's authority, or, inside a request JobWeaver serves, as its user (§17)."""
        return self._read(result_id, user=bound_user())

    def _read(self, result_id: str, *, user) -> TaskResult:
        try:
            job = job_get(job_id=str(result_id), user=user)
        except JobNotFound:
            raise TaskResultDoesNotExist(result_id) from None
        if kind_of(job) is not TASK:
            raise TaskResultDoesNotExist(result_id)
        return self._result(job, attempts_for_jobs(job_ids=[job.id])[job.id])


def _option(task: Task, name: str, default: int) -> int:
    value = getattr(task, name, None)
    return default if value is None else value
