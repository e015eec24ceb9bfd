"""Each job kind's runner, registered against the kind's name (apps/jobs/kinds/).

`AttemptRunner` (apps/executor/runner.py) asks `runner_for(claimed.kind)` and knows no kind.
A runner's `run` does the work of one claimed attempt under the attempt's checkpoints
(`attempt.ctx`) and returns what the attempt records as its result; it ends the attempt early by
raising StepFailed, AttemptStopped or AttemptReleased (apps/executor/steps.py). `finished` runs
once the attempt's ending has committed.
"""

from __future__ import annotations

from typing import Any, Protocol

from jobweaver.executor.services import ClaimedAttempt
from jobweaver.executor.steps import StepContext, run_steps
from jobweaver.executor.task_runner import announce_finished, run_task
from jobweaver.jobs.kinds import SIMULATION, TASK
from jobweaver.jobs.models import steps_of


class Attempt(Protocol):
    """What a runner may use of the attempt it runs in (AttemptRunner)."""

    ctx: StepContext

    def on_step_done(self, count: int, total: int) -> None: ...

    def on_task_progress(self, completed: int, total: int) -> None: ...


class KindRunner(Protocol):
    def run(self, claimed: ClaimedAttempt, attempt: Attempt) -> Any: ...

    def finished(self, claimed: ClaimedAttempt) -> None: ...


class SimulationRunner:
    """The steps, in order (apps/executor/steps.py)."""

    def run(self, claimed: ClaimedAttempt, attempt: Attempt) -> None:
        steps = steps_of(claimed.instruction)
        run_steps(steps, attempt.ctx, lambda count: attempt.on_step_done(count, len(steps)))

    def finished(self, claimed: ClaimedAttempt) -> None:
        pass


class TaskRunner:
    """The registered Python function, in a thread of its own (apps/executor/task_runner.py)."""

    def run(self, claimed: ClaimedAttempt, attempt: Attempt) -> Any:
        return run_task(claimed, attempt.ctx, attempt.on_task_progress)

    def finished(self, claimed: ClaimedAttempt) -> None:
        announce_finished(claimed)  # Django's task_finished signal, after the commit


RUNNERS: dict[str, KindRunner] = {
    SIMULATION.name: SimulationRunner(),
    TASK.name: TaskRunner(),
}


def runner_for(kind_name: str) -> KindRunner:
    """The runner of the kind called `kind_name`; LookupError if this executor has none."""
    try:
        return RUNNERS[kind_name]
    except KeyError:
        raise LookupError(f"no runner for job kind {kind_name!r} in this executor") from None
