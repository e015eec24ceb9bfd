"""`jobweaver.tasks.task`: declare a task with JobWeaver's options (ARCHITECTURE §13a).

    from jobweaver.tasks import task

    @task(retry_on=(ConnectionError,), retry_backoff=(1, 60), concurrency_key="customer-{id}")
    def sync_customer(id: int) -> None: ...

A thin wrapper over DEP 14's `task` that builds the backend's task class itself, so the options
work where the framework's own decorator takes none (Django 6's `django.tasks.task`) as where it
passes them through (the backport's). The DEP 14 arguments keep their meaning.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from jobweaver.jobs.python_tasks.compat import (
    DEFAULT_TASK_BACKEND_ALIAS,
    DEFAULT_TASK_PRIORITY,
    DEFAULT_TASK_QUEUE_NAME,
    task_backends,
)
from jobweaver.tasks.backend import JobWeaverTask


def task(
    function=None,
    *,
    priority: int = DEFAULT_TASK_PRIORITY,
    queue_name: str = DEFAULT_TASK_QUEUE_NAME,
    backend: str = DEFAULT_TASK_BACKEND_ALIAS,
    takes_context: bool = False,
    **options,
):
    """`@task` or `@task(...)`: a JobWeaverTask with DEP 14's arguments and JobWeaver's options
    (`JobWeaverTask.with_options` lists them); TypeError for an unknown option."""

    def wrapper(func) -> JobWeaverTask:
        task_class = task_backends[backend].task_class
        if not issubclass(task_class, JobWeaverTask):
            raise ImproperlyConfigured(
                f"jobweaver.tasks.task needs TASKS[{backend!r}] to be JobWeaver's backend "
                f"(jobweaver.tasks.JobWeaverBackend), not {task_class.__module__}"
            )
        declared = task_class(
            priority=priority,
            func=func,
            queue_name=queue_name,
            backend=backend,
            takes_context=takes_context,
            run_after=None,
        )
        return declared.with_options(**options) if options else declared

    return wrapper(function) if function is not None else wrapper
