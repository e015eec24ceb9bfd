"""Exceptions of Python tasks. A failed attempt records its exception's class path; these are
the classes JobWeaver itself records when a task did not end by raising (so `TaskError.
exception_class` always resolves), plus two a task may raise: to skip its retries, and to run
again later without using one."""

# A snooze longer than this is refused: a job meant for next month is a schedule's work.
MAX_SNOOZE_SECONDS = 30 * 86_400


class Snooze(Exception):
    """Raise Snooze(seconds) from a task (or call `context.snooze(seconds)`): the attempt ends
    SNOOZED and the job waits `seconds` before it runs again, without using a retry
    (ARCHITECTURE §13a). At most JOBWEAVER_MAX_SNOOZES per job; past that it dead-letters."""

    def __init__(self, seconds: float):
        if (
            not isinstance(seconds, (int, float))
            or isinstance(seconds, bool)
            or not 0 <= seconds <= MAX_SNOOZE_SECONDS
        ):
            raise ValueError(f"Snooze needs 0 to {MAX_SNOOZE_SECONDS} seconds, got {seconds!r}")
        super().__init__(f"snoozed for {seconds} s")
        self.seconds = float(seconds)


class NonRetryableError(Exception):
    """Raise it (or a subclass) from a task to dead-letter the job at once, without retries:
    the counterpart of a FAIL step with `"retryable": false`."""


class TaskTimedOut(Exception):
    """The attempt ran past the job's timeoutSeconds and was ended at the deadline."""


class AttemptLost(Exception):
    """The attempt's worker stopped renewing its lease (it died or froze); the rescue ended it."""


class TaskCancelled(Exception):
    """The job was cancelled before or while it ran."""
