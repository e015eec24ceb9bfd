"""Exceptions of Python tasks. A failed attempt records its exception's class path; these are
the classes JobWeaver itself records when a task did not end by raising (so `TaskError.
exception_class` always resolves), plus one a task may raise to skip its retries."""


class NonRetryableError(Exception):
    """Raise it (or a subclass) from a task to dead-letter the job at once, without retries:
    the counterpart of a FAIL step with `"retryable": false`."""


class TaskTimedOut(Exception):
    """The attempt ran past the job's timeoutSeconds and was ended at the deadline."""


class AttemptLost(Exception):
    """The attempt's worker stopped renewing its lease (it died or froze); the rescue ended it."""


class TaskCancelled(Exception):
    """The job was cancelled before or while it ran."""
