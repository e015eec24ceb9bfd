"""Django's Tasks API over JobWeaver (ARCHITECTURE §13):

    TASKS = {"default": {"BACKEND": "jobweaver.tasks.JobWeaverBackend"}}

    from jobweaver.tasks import NonRetryableError, Snooze, periodic, task

Exported lazily: importing this package (as Django does to find the backend) imports no model.
"""

from __future__ import annotations

_LAZY = {
    "JobWeaverBackend": "jobweaver.tasks.backend",
    "JobWeaverTask": "jobweaver.tasks.backend",
    # Declares a task with JobWeaver's options (ARCHITECTURE §13a).
    "task": "jobweaver.tasks.declare",
    # Raised by a task: dead-letter at once, whatever retries are left (ARCHITECTURE §13a).
    "NonRetryableError": "jobweaver.jobs.python_tasks.exceptions",
    # Declares a schedule for a task, deployed with the code (ARCHITECTURE §13a).
    "periodic": "jobweaver.schedules.periodic",
    # Raised by a task: run again in N seconds, no retry used (ARCHITECTURE §13a).
    "Snooze": "jobweaver.jobs.python_tasks.exceptions",
}


def __getattr__(name: str):
    # A module __getattr__ (PEP 562): the backend module imports models, so it loads on use.
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
