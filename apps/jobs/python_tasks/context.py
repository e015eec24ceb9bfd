"""The context a task with `takes_context=True` receives as its first argument."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from django.utils.version import PY311

from jobweaver.jobs.python_tasks.compat import TaskContext
from jobweaver.jobs.python_tasks.exceptions import Snooze


@dataclass(frozen=True, slots=PY311, kw_only=True)
class JobWeaverTaskContext(TaskContext):
    """DEP 14's context (`task_result`, `attempt`) plus what a long task needs from the runner
    that holds its lease: a way to report progress and to learn that it should stop.

    The task runs in a thread of its own while the runner keeps the lease, so both are cheap
    and thread-safe: `report_progress` only hands the numbers over (the runner writes them),
    and `is_cancelled` reads a flag the runner sets when the job was cancelled, its timeout
    passed, its lease was lost or the worker is shutting down.
    """

    stop_requested: threading.Event = field(repr=False, compare=False)
    progress_sink: Callable[[int, int], None] = field(repr=False, compare=False)
    parent_results: dict = field(default_factory=dict, repr=False, compare=False)
    """In a workflow (§16): the return values of the jobs it depends on, by ref (None for a
    SIMULATION job), in its dependsOn order."""

    def is_cancelled(self) -> bool:
        """True once this attempt should stop: return (or raise) soon; whatever it returns
        then is discarded."""
        return self.stop_requested.is_set()

    def snooze(self, seconds: float) -> NoReturn:
        """End this attempt SNOOZED: the job runs again in `seconds`, no retry used (raises
        Snooze, so nothing after it runs)."""
        raise Snooze(seconds)

    def report_progress(self, completed: int, total: int) -> None:
        """Shown as the attempt's and the job's progress `{stepsCompleted, totalSteps}`."""
        self.progress_sink(max(0, int(completed)), max(0, int(total)))
