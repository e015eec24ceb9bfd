"""The simulation steps (apps/executor/steps.py, ARCHITECTURE §7) with a fake checkpoint: no
database, no broker, no worker. Sleeps are a few hundred milliseconds at most."""

from __future__ import annotations

import logging
import socket
import time

import pytest

from jobweaver.executor import steps
from jobweaver.executor.steps import AttemptStopped, StepContext, StepFailed, run_steps


class FakeCheckpoint:
    """Counts its calls; raises `error` from call number `stop_at` on."""

    def __init__(self, stop_at: int | None = None, error: Exception | None = None):
        self.calls = 0
        self.stop_at = stop_at
        self.error = error or AttemptStopped("cancelled")

    def __call__(self) -> None:
        self.calls += 1
        if self.stop_at is not None and self.calls >= self.stop_at:
            raise self.error


def context(checkpoint=None, attempt: int = 1) -> StepContext:
    return StepContext(
        job_id="job-1",
        attempt=attempt,
        trace_id="trace-1",
        checkpoint=checkpoint or FakeCheckpoint(),
    )


def run(step: dict, ctx: StepContext) -> None:
    steps.STEP_TYPES[step["action"]].run(step, ctx)


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to resolve a name or open a socket fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("a simulated step touched the network")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


def test_every_step_type_of_the_contract_has_a_runner():
    assert set(steps.STEP_TYPES) == {"SLEEP", "LOG", "COMPUTE", "HTTP_CALL", "FAIL", "FLAKY"}


# --- SLEEP ---------------------------------------------------------------------------------


def test_sleep_waits_its_duration_in_slices_with_checkpoints():
    checkpoint = FakeCheckpoint()
    started = time.monotonic()

    run({"action": "SLEEP", "durationMs": 200}, context(checkpoint))

    assert time.monotonic() - started >= 0.2
    # One checkpoint per slice at least: cancellation is noticed within a slice.
    assert checkpoint.calls >= 0.2 / steps.SLICE_SECONDS


def test_sleep_stops_at_the_checkpoint_that_says_stop():
    checkpoint = FakeCheckpoint(stop_at=3)
    started = time.monotonic()

    with pytest.raises(AttemptStopped, match="cancelled"):
        run({"action": "SLEEP", "durationMs": 600_000}, context(checkpoint))

    assert checkpoint.calls == 3
    assert time.monotonic() - started < 3 * steps.SLICE_SECONDS + 1  # not ten minutes


def test_a_checkpoint_failure_ends_a_sleep_as_a_failure():
    checkpoint = FakeCheckpoint(stop_at=2, error=StepFailed("timed out", retryable=True))

    with pytest.raises(StepFailed, match="timed out"):
        run({"action": "SLEEP", "durationMs": 600_000}, context(checkpoint))


def test_a_zero_sleep_still_checks_once():
    checkpoint = FakeCheckpoint()

    run({"action": "SLEEP", "durationMs": 0}, context(checkpoint))

    assert checkpoint.calls == 1


# --- LOG -----------------------------------------------------------------------------------


def test_log_keeps_its_lines_with_the_attempt_and_logs_them_with_context(caplog):
    ctx = context(attempt=2)

    with caplog.at_level(logging.INFO, logger="jobweaver.steps"):
        run({"action": "LOG", "message": "first"}, ctx)
        run({"action": "LOG", "message": "second"}, ctx)

    assert ctx.log_lines == ["first", "second"]
    assert [r.getMessage() for r in caplog.records] == ["first", "second"]
    record = caplog.records[0]
    assert (record.levelno, record.job_id, record.attempt, record.trace_id) == (
        logging.INFO,
        "job-1",
        2,
        "trace-1",
    )


# --- COMPUTE -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("iterations", "checkpoints"),
    [(0, 0), (1, 1), (steps.COMPUTE_CHUNK, 1), (steps.COMPUTE_CHUNK * 2 + 1, 3)],
)
def test_compute_runs_its_iterations_with_a_checkpoint_per_chunk(iterations, checkpoints):
    checkpoint = FakeCheckpoint()

    run({"action": "COMPUTE", "iterations": iterations}, context(checkpoint))

    assert checkpoint.calls == checkpoints


def test_compute_stops_between_chunks():
    checkpoint = FakeCheckpoint(stop_at=2)

    with pytest.raises(AttemptStopped):
        run({"action": "COMPUTE", "iterations": 100_000_000}, context(checkpoint))

    assert checkpoint.calls == 2


# --- HTTP_CALL -----------------------------------------------------------------------------


def test_http_call_only_simulates_its_latency(no_network):
    checkpoint = FakeCheckpoint()
    started = time.monotonic()

    run(
        {"action": "HTTP_CALL", "url": "https://example.invalid/api", "latencyMs": 150},
        context(checkpoint),
    )

    assert time.monotonic() - started >= 0.15
    assert checkpoint.calls >= 0.15 / steps.SLICE_SECONDS


def test_http_call_can_be_cancelled_during_its_latency(no_network):
    with pytest.raises(AttemptStopped):
        run(
            {"action": "HTTP_CALL", "url": "https://example.invalid", "latencyMs": 600_000},
            context(FakeCheckpoint(stop_at=2)),
        )


# --- FAIL and FLAKY ------------------------------------------------------------------------


@pytest.mark.parametrize("retryable", [True, False])
def test_fail_fails_the_attempt_with_its_message_and_retryable_flag(retryable):
    with pytest.raises(StepFailed) as raised:
        run({"action": "FAIL", "message": "boom", "retryable": retryable}, context())

    assert (raised.value.message, raised.value.retryable) == ("boom", retryable)


@pytest.mark.parametrize(("attempt", "fails"), [(1, True), (2, True), (3, False), (4, False)])
def test_flaky_fails_while_the_attempt_number_is_at_most_fail_times(attempt, fails):
    step = {"action": "FLAKY", "failTimes": 2, "message": "flaky"}

    if fails:
        with pytest.raises(StepFailed) as raised:
            run(step, context(attempt=attempt))
        assert raised.value.retryable is True
        assert raised.value.message == f"flaky (attempt {attempt} of 2 failing)"
    else:
        run(step, context(attempt=attempt))


# --- running the steps ---------------------------------------------------------------------


def test_steps_run_in_order_and_report_progress_after_each():
    ctx, done = context(), []

    run_steps(
        [
            {"action": "LOG", "message": "a"},
            {"action": "COMPUTE", "iterations": 10},
            {"action": "LOG", "message": "b"},
        ],
        ctx,
        done.append,
    )

    assert ctx.log_lines == ["a", "b"]
    assert done == [1, 2, 3]


def test_a_failing_step_ends_the_run_and_later_steps_never_run():
    ctx, done = context(), []

    with pytest.raises(StepFailed):
        run_steps(
            [
                {"action": "LOG", "message": "a"},
                {"action": "FAIL", "message": "boom", "retryable": True},
                {"action": "LOG", "message": "never"},
            ],
            ctx,
            done.append,
        )

    assert (ctx.log_lines, done) == (["a"], [1])


def test_a_stop_between_steps_is_noticed_before_the_next_step():
    ctx, done = context(FakeCheckpoint(stop_at=2)), []

    with pytest.raises(AttemptStopped):
        run_steps(
            [{"action": "LOG", "message": "a"}, {"action": "LOG", "message": "b"}],
            ctx,
            done.append,
        )

    assert (ctx.log_lines, done) == (["a"], [1])
