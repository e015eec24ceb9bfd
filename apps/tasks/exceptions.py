"""The exceptions' former home (they live in apps/jobs/python_tasks/exceptions.py): attempts
recorded before the move name these paths as their exception class, and DEP 14's
`TaskError.exception_class` imports the path it was given."""

from jobweaver.jobs.python_tasks.exceptions import (
    AttemptLost,
    NonRetryableError,
    TaskCancelled,
    TaskTimedOut,
)

__all__ = ["AttemptLost", "NonRetryableError", "TaskCancelled", "TaskTimedOut"]
