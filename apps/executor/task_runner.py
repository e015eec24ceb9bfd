"""Running a TASK job's Python function inside an attempt (ARCHITECTURE §13).

Why the function runs in a thread of its own. Everything an attempt guarantees — its lease is
renewed, a cancel request is noticed within CANCEL_POLL_SECONDS, the timeout ends it at the
deadline, a shutdown releases it — lives in `AttemptRunner.checkpoint`, which simulation steps
call between and inside steps. A plain Python function never calls it. So the function runs in
a thread started for it, and the attempt's own thread (the Celery pool thread that holds the
delivery) waits for it in short slices, calling `checkpoint` between slices exactly as a SLEEP
step does. When `checkpoint` ends the attempt — timeout, cancellation, lost lease, shutdown —
the runner records that ending at once ("timed out after N s" at the deadline, not whenever the
function returns) and raises the stop flag that the function sees through its context
(`context.is_cancelled()`), so a cooperative task stops within a slice.

An `async def` task runs as a task on the executor's own event loop (one thread for all of this
process's coroutines) instead; the attempt's thread waits for it the same way, and an attempt
that ends without it cancels the coroutine: CancelledError at its next await, real cancellation.

Python cannot kill a thread. A function that ignores the flag runs on until it returns, and
what it returns is discarded: its attempt is closed and the execution's fencing token has moved
on (to nobody, or to the next attempt), so an outcome offered for it would be refused by
`attempt_finish` — the same fence that refuses a worker whose lease was rescued. The discard is
logged. SIGALRM works only in a process's main thread, and Celery's `threads` pool runs attempts
in worker threads. An executor that must be able to kill a task runs `--pool processes`
(apps/executor/process_pool.py): long-lived children, forked from a forkserver that set Django
up once, so no attempt pays for a process start.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import logging
import threading
import traceback as tb
import uuid
from collections.abc import Callable
from dataclasses import replace
from inspect import iscoroutinefunction
from typing import Any

from django.db import connections

from jobweaver.conf import settings
from jobweaver.core.errors import InvalidRequest
from jobweaver.executor.services import ClaimedAttempt
from jobweaver.executor.steps import SLICE_SECONDS, AttemptSnoozed, StepContext, StepFailed
from jobweaver.jobs.python_tasks.compat import Task, TaskResult, task_finished, task_started
from jobweaver.jobs.python_tasks.context import JobWeaverTaskContext
from jobweaver.jobs.python_tasks.exceptions import NonRetryableError, Snooze, TaskTimedOut
from jobweaver.jobs.python_tasks.payload import json_only
from jobweaver.jobs.python_tasks.registry import registry_get
from jobweaver.jobs.python_tasks.results import TaskResultsBackend, jobweaver_backend
from jobweaver.jobs.selectors import attempts_for_jobs, job_get, parent_results

logger = logging.getLogger(__name__)

MAX_ERROR_CHARS = 1000
MAX_TRACEBACK_CHARS = 4000


class TaskRaised(StepFailed):
    """The task's attempt failed with this exception (recorded as its type and traceback)."""

    def __init__(
        self,
        message: str,
        *,
        exception_type: str,
        traceback: str,
        retryable: bool,
        exception_mro: tuple[str, ...] = (),
    ):
        super().__init__(message, retryable=retryable)
        self.exception_type = exception_type
        self.traceback = traceback
        # The exception's class paths, most specific first: what a task's retry_on matches.
        self.exception_mro = exception_mro or ((exception_type,) if exception_type else ())


def recorded_exception(failure: StepFailed) -> dict:
    """What a failure reports beyond its message (a task's exception)."""
    if isinstance(failure, TaskRaised):
        return {
            "exception_type": failure.exception_type,
            "traceback": failure.traceback,
            "exception_mro": failure.exception_mro,
        }
    return {}


def class_path(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def shorten(text: str, limit: int) -> str:
    """The end of `text` (where a traceback names the failing line), at most `limit` chars."""
    if len(text) <= limit:
        return text
    return f"[{len(text) - limit} characters cut]\n{text[-limit:]}"


def failure_of(exc: BaseException) -> TaskRaised:
    message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return TaskRaised(
        shorten(message, MAX_ERROR_CHARS),
        exception_type=class_path(type(exc)),
        traceback=shorten("".join(tb.format_exception(exc)), MAX_TRACEBACK_CHARS),
        retryable=not isinstance(exc, NonRetryableError),
        exception_mro=tuple(class_path(cls) for cls in type(exc).__mro__),
    )


# jobweaver.testing runs a function in the attempt's own thread, so it sees the test's
# uncommitted rows through the test's connection; an executor never does.
RUN_IN_CALLERS_THREAD = False

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def event_loop() -> asyncio.AbstractEventLoop:
    """The executor's event loop for `async def` tasks, running in a thread of its own from the
    first one on: every async attempt of this process is a task on it, so a cancel reaches the
    coroutine as CancelledError at its next await."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="task-event-loop", daemon=True).start()
        return _loop


class _TaskCall:
    """The function running in its own thread, or the coroutine on the executor's event loop;
    what it returned or raised, once `done`."""

    def __init__(self, task: Task, args: list, kwargs: dict, context: JobWeaverTaskContext | None):
        self.task, self.args, self.kwargs, self.context = task, args, kwargs, context
        self.done = threading.Event()
        self.stop = context.stop_requested if context else threading.Event()
        self.value: Any = None
        self.exception: BaseException | None = None
        self.abandoned_because = ""
        self.future: concurrent.futures.Future | None = None

    def start(self, name: str) -> None:
        """Run it: a thread for a function, a task on the event loop for a coroutine. Either
        carries the attempt's log context (trace, job, attempt)."""
        arguments = (self.context, *self.args) if self.context is not None else self.args
        if iscoroutinefunction(self.task.func):
            # run_coroutine_threadsafe schedules from this thread's context, so the coroutine
            # logs with the attempt's context too.
            coroutine = self.task.func(*arguments, **self.kwargs)
            self.future = asyncio.run_coroutine_threadsafe(coroutine, event_loop())
            self.future.add_done_callback(self._coroutine_done)
            return
        if RUN_IN_CALLERS_THREAD:
            self.run(arguments, own_thread=False)
            return
        thread = threading.Thread(
            target=contextvars.copy_context().run,
            args=(self.run, arguments),
            name=name,
            daemon=True,
        )
        thread.start()

    def run(self, arguments: tuple, *, own_thread: bool = True) -> None:
        try:
            self.value = self.task.func(*arguments, **self.kwargs)
        except BaseException as exc:  # noqa: BLE001 - every exception is the attempt's outcome
            self.exception = exc
        finally:
            if own_thread:
                connections.close_all()  # this thread's connections, if the task used the ORM
            self._finished()

    def _coroutine_done(self, future: concurrent.futures.Future) -> None:
        try:
            self.value = future.result()
        except BaseException as exc:  # noqa: BLE001 - CancelledError included
            self.exception = exc
        self._finished()

    def _finished(self) -> None:
        self.done.set()
        if self.abandoned_because:
            logger.warning(
                "task %s %s after its attempt ended (%s); its %s is discarded",
                self.task.module_path,
                "was cancelled" if self.future is not None else "returned",
                self.abandoned_because,
                "exception" if self.exception is not None else "result",
            )

    def abandon(self, reason: str) -> None:
        """The attempt ended without it: a function is asked to stop (its context says so), a
        coroutine is cancelled."""
        self.abandoned_because = reason
        self.stop.set()
        if self.future is not None:
            self.future.cancel()


def timeout_failure(message: str) -> TaskRaised:
    """A task's attempt that ended at its timeout (retryable, as a SLEEP step's timeout)."""
    return TaskRaised(
        message,
        exception_type=class_path(TaskTimedOut),
        traceback=f"{class_path(TaskTimedOut)}: {message}\n",
        retryable=True,
    )


def workflow_inputs(job_id: uuid.UUID, workflow_id: uuid.UUID | None) -> tuple[str, dict]:
    """How a job takes its dependencies' results, and those results by ref (§16)."""
    return ("", {}) if workflow_id is None else parent_results(job_id=job_id)


def with_parent_results(args: list, mode: str, parents: dict) -> list:
    """Celery's canvas rules: a chain's `.s()` gets its parent's value first, a chord's
    callback the list of its group's values; `.si()` and API jobs get nothing."""
    if mode == "first":
        return [next(iter(parents.values()), None), *args]
    if mode == "list":
        return [list(parents.values()), *args]
    return list(args)


def registered_task(path: str) -> Task:
    """The task registered at `path`; TaskRaised (not retryable) when this worker has none."""
    registered = registry_get(path)
    if registered is None:  # validated on submit: the code deployed here differs
        raise TaskRaised(
            f"task {path} is not registered in this worker",
            exception_type=class_path(LookupError),
            traceback="",
            retryable=False,
        )
    return registered


def run_task(
    claimed: ClaimedAttempt, ctx: StepContext, on_progress: Callable[[int, int], None]
) -> Any:
    """Call the claimed TASK job's function under the attempt's checkpoints and return its
    value (JSON). Raises TaskRaised when it raised, timed out or returned something that is
    not JSON; AttemptStopped / AttemptReleased pass through from `ctx.checkpoint`."""
    registered = registered_task(claimed.instruction["task"])
    backend = jobweaver_backend()
    task_result = task_result_of(backend, claimed.job_id)
    context = None
    call_progress: list[tuple[int, int]] = []
    if registered.takes_context:
        context = JobWeaverTaskContext(
            task_result=task_result,
            stop_requested=threading.Event(),
            progress_sink=lambda done, total: call_progress.append((done, total)),
        )
    mode, parents = workflow_inputs(claimed.job_id, claimed.workflow_id)
    if context is not None and parents:
        context = replace(context, parent_results=parents)
    args = with_parent_results(claimed.instruction["args"], mode, parents)
    call = _TaskCall(registered, args, claimed.instruction["kwargs"], context)
    _announce(task_started, backend, task_result)
    call.start(name=f"task-{str(claimed.job_id)[:8]}")
    reported: tuple[int, int] | None = None
    try:
        while not call.done.wait(SLICE_SECONDS):
            ctx.checkpoint()
            if call_progress and call_progress[-1] != reported:
                reported = call_progress[-1]
                on_progress(*reported)
    except StepFailed as failure:  # the timeout: the attempt ends at the deadline
        call.abandon("timed out")
        raise timeout_failure(failure.message) from None
    except BaseException as stop:  # cancelled, lease lost, shutting down
        call.abandon(str(stop) or type(stop).__name__)
        raise
    if call_progress and call_progress[-1] != reported:
        on_progress(*call_progress[-1])
    if isinstance(call.exception, Snooze):
        raise AttemptSnoozed(call.exception.seconds)
    if call.exception is not None:
        raise failure_of(call.exception)
    return json_result(call.value)


def json_result(value: Any) -> Any:
    """The return value as JSON, within JOBWEAVER_TASK_MAX_RESULT_BYTES, or a failure."""
    try:
        value = json_only(value, "the return value")
    except InvalidRequest as exc:
        raise failure_of(TypeError(exc.message)) from None
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
    limit = settings.JOBWEAVER_TASK_MAX_RESULT_BYTES
    if size > limit:
        raise failure_of(ValueError(f"the return value is {size} bytes as JSON; at most {limit}"))
    return value


def task_result_of(backend: TaskResultsBackend, job_id: uuid.UUID) -> TaskResult:
    job = job_get(job_id=job_id)
    return backend.result_for_job(job, attempts_for_jobs(job_ids=[job.id])[job.id])


def announce_started(claimed: ClaimedAttempt) -> None:
    """Send `task_started` for an attempt that runs elsewhere (a process-pool child)."""
    backend = jobweaver_backend()
    _announce(task_started, backend, task_result_of(backend, claimed.job_id))


def announce_finished(claimed: ClaimedAttempt) -> None:
    """Send `task_finished` once the attempt's ending committed, with the result as it now
    stands (SUCCESSFUL, FAILED, or READY again when a retry is due). A receiver that raises
    is logged, never allowed to disturb the worker."""
    backend = jobweaver_backend()
    try:
        task_result = task_result_of(backend, claimed.job_id)
    except Exception:
        logger.warning("task_finished for job %s not sent", claimed.job_id, exc_info=True)
        return
    _announce(task_finished, backend, task_result)


def _announce(signal, backend: TaskResultsBackend, task_result: TaskResult) -> None:
    for receiver, response in signal.send_robust(type(backend), task_result=task_result):
        if isinstance(response, Exception):
            logger.warning("task signal receiver %r raised %r", receiver, response)
