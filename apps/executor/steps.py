"""The simulation steps: one small class per step type (ARCHITECTURE §7). No ORM here.

Long steps (SLEEP, HTTP_CALL, COMPUTE) call `ctx.checkpoint()` often: that is where the
attempt notices cancellation, a lost lease or its timeout, and where heartbeats happen.
HTTP_CALL is simulated latency only; no network request is ever made.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

logger = logging.getLogger("jobweaver.steps")

SLICE_SECONDS = 0.05
COMPUTE_CHUNK = 50_000


class StepFailed(Exception):
    """The attempt failed; `retryable` says whether the retry policy may try again."""

    def __init__(self, message: str, *, retryable: bool = True):
        super().__init__(message)
        self.message = message
        self.retryable = retryable


class AttemptStopped(Exception):
    """The attempt must stop now (cancelled, or its fencing token is no longer current)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class AttemptReleased(AttemptStopped):
    """The worker is shutting down and its grace period is over: hand the job back."""


class AttemptSnoozed(Exception):
    """The task asked to run again in `seconds` (Snooze): the attempt ends SNOOZED."""

    def __init__(self, seconds: float):
        super().__init__(f"snoozed for {seconds} s")
        self.seconds = seconds


@dataclass
class StepContext:
    job_id: str
    attempt: int
    trace_id: str
    # Called at every checkpoint; raises AttemptStopped or StepFailed to end the attempt.
    checkpoint: Callable[[], None] = lambda: None
    log_lines: list[str] = field(default_factory=list)

    def wait(self, seconds: float) -> None:
        """Sleep in short slices so that checkpoints keep running."""
        deadline = time.monotonic() + seconds
        while True:
            self.checkpoint()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            time.sleep(min(SLICE_SECONDS, remaining))


class SleepStep:
    def run(self, step: dict, ctx: StepContext) -> None:
        ctx.wait(step["durationMs"] / 1000)


class LogStep:
    def run(self, step: dict, ctx: StepContext) -> None:
        logger.info(
            "%s",
            step["message"],
            extra={"job_id": ctx.job_id, "attempt": ctx.attempt, "trace_id": ctx.trace_id},
        )
        ctx.log_lines.append(step["message"])


class ComputeStep:
    def run(self, step: dict, ctx: StepContext) -> None:
        remaining, accumulator = step["iterations"], 0
        while remaining > 0:
            ctx.checkpoint()
            chunk = min(COMPUTE_CHUNK, remaining)
            for i in range(chunk):
                accumulator = (accumulator + i * i) % 1_000_003
            remaining -= chunk


class HttpCallStep:
    def run(self, step: dict, ctx: StepContext) -> None:
        # Simulated: the latency of a call to step["url"], without any network I/O.
        ctx.wait(step["latencyMs"] / 1000)


class FailStep:
    def run(self, step: dict, ctx: StepContext) -> None:
        raise StepFailed(step["message"], retryable=step["retryable"])


class FlakyStep:
    def run(self, step: dict, ctx: StepContext) -> None:
        if ctx.attempt <= step["failTimes"]:
            raise StepFailed(
                f"{step['message']} (attempt {ctx.attempt} of {step['failTimes']} failing)",
                retryable=True,
            )


STEP_TYPES = {
    "SLEEP": SleepStep(),
    "LOG": LogStep(),
    "COMPUTE": ComputeStep(),
    "HTTP_CALL": HttpCallStep(),
    "FAIL": FailStep(),
    "FLAKY": FlakyStep(),
}


def run_steps(steps: list[dict], ctx: StepContext, on_step_done: Callable[[int], None]) -> None:
    """Run the steps in order; `on_step_done(n)` after each with the number completed so far."""
    for index, step in enumerate(steps):
        ctx.checkpoint()
        STEP_TYPES[step["action"]].run(step, ctx)
        on_step_done(index + 1)
