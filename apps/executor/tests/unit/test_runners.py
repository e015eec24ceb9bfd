"""Each job kind has its runner in this executor (apps/executor/runners.py), and the runner
feeds the attempt what its kind reports. No database: the attempt is a fake."""

from __future__ import annotations

import uuid

import pytest

from jobweaver.executor.runners import RUNNERS, SimulationRunner, TaskRunner, runner_for
from jobweaver.executor.services import ClaimedAttempt
from jobweaver.executor.steps import StepContext
from jobweaver.jobs.kinds import KINDS, SIMULATION, TASK


class FakeAttempt:
    def __init__(self):
        self.ctx = StepContext(job_id="job", attempt=1, trace_id="trace")
        self.steps_done: list[tuple[int, int]] = []

    def on_step_done(self, count: int, total: int) -> None:
        self.steps_done.append((count, total))

    def on_task_progress(self, completed: int, total: int) -> None:
        raise AssertionError("a simulation reports steps, not task progress")


def claimed(kind: str, instruction: dict) -> ClaimedAttempt:
    return ClaimedAttempt(
        job_id=uuid.uuid4(),
        event_id=uuid.uuid4(),
        attempt=1,
        trace_id="trace",
        kind=kind,
        instruction=instruction,
        timeout_seconds=60,
    )


def test_every_kind_has_a_runner_and_every_runner_a_kind():
    assert set(RUNNERS) == set(KINDS)
    assert isinstance(runner_for(SIMULATION.name), SimulationRunner)
    assert isinstance(runner_for(TASK.name), TaskRunner)


def test_an_unknown_kind_has_no_runner():
    with pytest.raises(LookupError, match="NOPE"):
        runner_for("NOPE")


def test_the_simulation_runner_runs_the_steps_and_reports_each_with_the_total():
    steps = [{"action": "LOG", "message": "one"}, {"action": "LOG", "message": "two"}]
    attempt = FakeAttempt()

    value = SimulationRunner().run(claimed(SIMULATION.name, {"steps": steps}), attempt)

    assert value is None
    assert attempt.steps_done == [(1, 2), (2, 2)]
    assert attempt.ctx.log_lines == ["one", "two"]
