"""A child of the executor's process pool (`--pool processes`, ARCHITECTURE §13a): it runs one
attempt at a time for its parent, which keeps the Kafka consumer, the lease, the heartbeats and
every write of the attempt's outcome (apps/executor/process_pool.py).

The child talks over one pipe: the parent sends a `Work`, the child answers with `Progress`
messages and one `Finished`. The parent asks it to stop by setting a shared event — a task's
`context.is_cancelled()`, a simulation step's checkpoint — and nothing is ever raised into it;
a child that does not stop in time is killed. A child whose parent is gone exits on its own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import signal
import threading
import uuid
from dataclasses import dataclass
from inspect import iscoroutinefunction
from multiprocessing.connection import Connection
from typing import Any

from django.db import close_old_connections

from jobweaver.core.logcontext import log_context
from jobweaver.executor.steps import (
    SLICE_SECONDS,
    AttemptStopped,
    StepContext,
    StepFailed,
    run_steps,
)
from jobweaver.executor.task_runner import (
    TaskRaised,
    failure_of,
    json_result,
    recorded_exception,
    registered_task,
    task_result_of,
    with_parent_results,
)
from jobweaver.jobs.kinds import TASK
from jobweaver.jobs.models import steps_of
from jobweaver.jobs.python_tasks.context import JobWeaverTaskContext
from jobweaver.jobs.python_tasks.exceptions import Snooze
from jobweaver.jobs.python_tasks.results import jobweaver_backend

logger = logging.getLogger(__name__)

# Set in every child: how the example task `crash()` knows it may end its process.
CHILD_ENVIRONMENT = "JOBWEAVER_POOL_CHILD"
ORPHAN_POLL_SECONDS = 1.0


@dataclass(frozen=True)
class Work:
    """One attempt for the child to run: the claimed attempt's kind and instruction."""

    kind: str
    job_id: uuid.UUID
    attempt: int
    trace_id: str
    instruction: dict
    # A workflow's job (§16): how it takes its dependencies' results, and those by ref.
    parent_results_as: str = ""
    parent_results: dict | None = None


@dataclass(frozen=True)
class Progress:
    completed: int
    total: int
    log_lines: tuple[str, ...] = ()  # a simulation's LOG lines since the last message


@dataclass(frozen=True)
class Finished:
    """How the attempt's work ended in the child; the parent turns it into the ending."""

    how: str  # "returned", "failed", "snoozed" or "stopped" (it was asked to)
    value: Any = None
    # A failure's fields (TaskRaised's; an exception with keyword arguments does not pickle).
    message: str = ""
    retryable: bool = True
    exception_type: str = ""
    traceback: str = ""
    exception_mro: tuple[str, ...] = ()
    snooze_seconds: float = 0.0
    log_lines: tuple[str, ...] = ()
    max_rss_kb: int = 0  # the child's peak memory so far (--max-memory-per-child)


def child_main(channel: Connection, stop) -> None:
    """The child's whole life: attempts until the parent sends None or goes away."""
    starter = os.getppid()
    # Ctrl-C in a terminal reaches the whole process group; the parent decides what stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ[CHILD_ENVIRONMENT] = "1"
    _set_up_django()
    threading.Thread(
        target=_exit_when_orphaned, args=(starter,), name="orphan-watch", daemon=True
    ).start()
    while True:
        try:
            work = channel.recv()
        except (EOFError, OSError):
            return  # the parent closed the pipe
        if work is None:
            return  # retired (--max-tasks-per-child, --max-memory-per-child, shutdown)
        close_old_connections()
        with log_context(trace_id=work.trace_id, job_id=work.job_id, attempt=work.attempt):
            finished = run_work(work, channel.send, stop)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        channel.send(Finished(**{**finished.__dict__, "max_rss_kb": peak}))


def _set_up_django() -> None:
    """Forkserver children inherit a set-up Django (pool_preload); spawned ones set it up."""
    from django.apps import apps

    if not apps.ready:
        import django

        django.setup()


def _exit_when_orphaned(parent: int) -> None:
    """The process that started this child (the executor, or multiprocessing's forkserver,
    which exits with the executor) is gone: exit, even in the middle of a task that never
    looks up — its attempt's lease expires and the job is rescued."""
    while True:
        threading.Event().wait(ORPHAN_POLL_SECONDS)
        if os.getppid() != parent:
            os._exit(1)


def run_work(work: Work, send, stop) -> Finished:
    """Run one attempt's work; `send` carries Progress to the parent, `stop` is the event the
    parent sets to ask for a stop."""
    try:
        if work.kind == TASK.name:
            return _run_task(work, send, stop)
        return _run_steps(work, send, stop)
    except AttemptStopped:
        return Finished("stopped")
    except TaskRaised as failure:
        return failed(failure)


def failed(failure: StepFailed, log_lines: tuple[str, ...] = ()) -> Finished:
    """A failure as the child reports it: a task's exception, or a FAIL or FLAKY step."""
    fields = recorded_exception(failure)
    return Finished(
        "failed",
        message=failure.message,
        retryable=failure.retryable,
        exception_type=fields.get("exception_type", ""),
        traceback=fields.get("traceback", ""),
        exception_mro=fields.get("exception_mro", ()),
        log_lines=log_lines,
    )


def _run_steps(work: Work, send, stop) -> Finished:
    def checkpoint() -> None:
        if stop.is_set():
            raise AttemptStopped("asked to stop")

    ctx = StepContext(
        job_id=str(work.job_id), attempt=work.attempt, trace_id=work.trace_id, checkpoint=checkpoint
    )
    steps = steps_of(work.instruction)
    sent = 0

    def on_step_done(count: int) -> None:
        nonlocal sent
        send(Progress(count, len(steps), tuple(ctx.log_lines[sent:])))
        sent = len(ctx.log_lines)

    try:
        run_steps(steps, ctx, on_step_done)
    except StepFailed as failure:  # a FAIL or FLAKY step
        return failed(failure, tuple(ctx.log_lines[sent:]))
    return Finished("returned", log_lines=tuple(ctx.log_lines[sent:]))


def _run_task(work: Work, send, stop) -> Finished:
    registered = registered_task(work.instruction["task"])
    parents = work.parent_results or {}
    args = with_parent_results(work.instruction["args"], work.parent_results_as, parents)
    kwargs = work.instruction["kwargs"]
    if registered.takes_context:
        context = JobWeaverTaskContext(
            task_result=task_result_of(jobweaver_backend(), work.job_id),
            stop_requested=stop,
            progress_sink=lambda done, total: send(Progress(done, total)),
            parent_results=parents,
        )
        args = [context, *args]
    try:
        if iscoroutinefunction(registered.func):
            value = asyncio.run(_until_stopped(registered.func(*args, **kwargs), stop))
        else:
            value = registered.func(*args, **kwargs)
    except Snooze as snooze:
        return Finished("snoozed", snooze_seconds=snooze.seconds)
    except BaseException as exc:  # noqa: BLE001 - every exception is the attempt's outcome
        return failed(failure_of(exc))
    return Finished("returned", value=json_result(value))


async def _until_stopped(coroutine, stop) -> Any:
    """Await the task's coroutine; cancel it (CancelledError at its next await) once the
    parent asks for a stop."""
    task = asyncio.ensure_future(coroutine)
    while not task.done():
        await asyncio.wait({task}, timeout=SLICE_SECONDS)
        if stop.is_set() and not task.done():
            task.cancel()
            break
    return await task
