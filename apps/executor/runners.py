"""Each job kind's runner, registered against the kind's name (apps/jobs/kinds/).

`AttemptRunner` (apps/executor/runner.py) asks `runner_for(claimed.kind)` and knows no kind.
A runner's `run` does the work of one claimed attempt under the attempt's checkpoints
(`attempt.ctx`) and returns what the attempt records as its result; it ends the attempt early by
raising StepFailed, AttemptStopped or AttemptReleased (apps/executor/steps.py). `finished` runs
once the attempt's ending has committed. Under `--pool processes` every kind runs in a child
process instead (`PooledRunner`).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from jobweaver.conf import settings
from jobweaver.executor.pool_child import Finished, Progress, Work
from jobweaver.executor.process_pool import ChildDied, ProcessPool, current_pool
from jobweaver.executor.services import ClaimedAttempt
from jobweaver.executor.steps import (
    SLICE_SECONDS,
    AttemptReleased,
    AttemptSnoozed,
    AttemptStopped,
    StepContext,
    StepFailed,
    run_steps,
)
from jobweaver.executor.task_runner import (
    TaskRaised,
    announce_finished,
    announce_started,
    run_task,
    timeout_failure,
    workflow_inputs,
)
from jobweaver.jobs.kinds import SIMULATION, TASK
from jobweaver.jobs.models import steps_of


class Attempt(Protocol):
    """What a runner may use of the attempt it runs in (AttemptRunner)."""

    ctx: StepContext

    def on_step_done(self, count: int, total: int) -> None: ...

    def on_task_progress(self, completed: int, total: int) -> None: ...

    def keep_alive(self) -> None: ...


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
    """The runner of the kind called `kind_name` (in a child process under the process pool);
    LookupError if this executor has none."""
    try:
        runner = RUNNERS[kind_name]
    except KeyError:
        raise LookupError(f"no runner for job kind {kind_name!r} in this executor") from None
    pool = current_pool()
    return runner if pool is None else PooledRunner(pool, runner)


class PooledRunner:
    """Any kind's attempt, run by a child of the process pool (ARCHITECTURE §13a), while this
    thread keeps the attempt's lease and writes its progress and ending.

    The timeout asks the child to stop and the attempt stays RUNNING: a child that stops by the
    hard timeout (`hard_timeout_seconds`, default the timeout plus
    JOBWEAVER_HARD_TIMEOUT_GRACE_SECONDS) ends it FAILURE "timed out"; one that does not is
    killed and ends it FAILURE "killed at the hard timeout". A cancel or a lost lease asks the
    child to stop too, and kills it if it has not stopped within a third of the lease (no
    heartbeat renews a cancelled attempt's lease). A child that dies fails only its attempt.
    Killed or dead, the child is replaced before the slot takes its next attempt.
    """

    def __init__(self, pool: ProcessPool, kind_runner: KindRunner):
        self.pool, self.kind_runner = pool, kind_runner

    def run(self, claimed: ClaimedAttempt, attempt: Attempt) -> Any:
        if claimed.kind == TASK.name:
            announce_started(claimed)
        child = self.pool.acquire()
        try:
            return self._supervise(child, claimed, attempt)
        finally:
            self.pool.release(child)

    def finished(self, claimed: ClaimedAttempt) -> None:
        self.kind_runner.finished(claimed)

    def _supervise(self, child, claimed: ClaimedAttempt, attempt: Attempt) -> Any:
        started = time.monotonic()
        hard = claimed.hard_timeout_seconds or (
            claimed.timeout_seconds + settings.JOBWEAVER_HARD_TIMEOUT_GRACE_SECONDS
        )
        asked: Exception | None = None  # why the child was asked to stop
        kill_at = float("inf")
        mode, parents = ("", {})
        if claimed.kind == TASK.name:
            mode, parents = workflow_inputs(claimed.job_id, claimed.workflow_id)
        work = Work(
            claimed.kind,
            claimed.job_id,
            claimed.attempt,
            claimed.trace_id,
            claimed.instruction,
            parent_results_as=mode,
            parent_results=parents,
        )
        child.begin(work)
        while True:
            try:
                messages = child.receive(SLICE_SECONDS)
            except ChildDied as death:
                raise StepFailed(str(death), retryable=True) from None
            finished = self._take(messages, claimed, attempt)
            if finished is not None:
                break
            now = time.monotonic()
            try:
                if asked is None:
                    attempt.ctx.checkpoint()
                elif isinstance(asked, StepFailed):  # timed out: the lease still holds
                    attempt.keep_alive()
            except AttemptReleased:  # the shutdown's grace period is over
                child.kill()
                raise
            except StepFailed as timeout:
                asked, kill_at = timeout, started + hard
                child.ask_to_stop()
            except AttemptStopped as stop:
                asked = stop
                kill_at = min(kill_at, now + settings.JOBWEAVER_LEASE_SECONDS / 3)
                child.ask_to_stop()
            if now >= kill_at:
                child.kill()
                if isinstance(asked, StepFailed):
                    raise self._timed_out(claimed, f"killed at the hard timeout after {hard:g} s")
                raise asked
        if isinstance(asked, StepFailed):
            raise self._timed_out(claimed, asked.message)
        if asked is not None:
            raise asked
        return self._outcome(finished)

    @staticmethod
    def _take(messages, claimed: ClaimedAttempt, attempt: Attempt) -> Finished | None:
        """Keep the log lines, write the latest progress; the Finished, if it came."""
        latest: Progress | None = None
        finished: Finished | None = None
        for message in messages:
            attempt.ctx.log_lines.extend(message.log_lines)
            if isinstance(message, Finished):
                finished = message
            else:
                latest = message
        if latest is not None:
            if claimed.kind == TASK.name:
                attempt.on_task_progress(latest.completed, latest.total)
            else:
                attempt.on_step_done(latest.completed, latest.total)
        return finished

    @staticmethod
    def _timed_out(claimed: ClaimedAttempt, message: str) -> StepFailed:
        if claimed.kind == TASK.name:
            return timeout_failure(message)
        return StepFailed(message, retryable=True)

    @staticmethod
    def _outcome(finished: Finished) -> Any:
        if finished.how == "returned":
            return finished.value
        if finished.how == "snoozed":
            raise AttemptSnoozed(finished.snooze_seconds)
        if finished.how == "stopped":  # it stopped on a request this attempt did not make
            raise AttemptStopped("the child stopped")
        raise TaskRaised(
            finished.message,
            exception_type=finished.exception_type,
            traceback=finished.traceback,
            retryable=finished.retryable,
            exception_mro=finished.exception_mro,
        )
