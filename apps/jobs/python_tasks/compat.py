"""The one import shim for Django's Tasks framework (DEP 14).

Django 6.0 ships it as `django.tasks`; on Django 5.2 the `django-tasks` package is its backport,
imported as `django_tasks`, with the same names (`task`, `Task`, `TaskResult`,
`TaskResultStatus`, `TaskContext`, `BaseTaskBackend`, the signals, the exceptions). JobWeaver's
own code imports them from here and nowhere else, so moving to Django 6 changes no other line:
this module takes `django.tasks` when it exists and the backport otherwise. (The project pins
Django 5.2, so the `django.tasks` branch is written from Django 6.0's documented names but is not
exercised by our test suite; the one rename we know of, `InvalidTaskError` → `InvalidTask`, is
absorbed here.)

User code written against the backport (`from django_tasks import task`) keeps working on
Django 6 as long as the backport stays installed: both read `settings.TASKS`, so both build
our backend, and our backend's `task_class` (a subclass of whichever `Task` this module chose)
is what their `@task` decorator creates. `TASK_CLASSES` holds every `Task` class that may appear
(the backport's and Django's), so the registry recognises tasks made by either.
"""

from __future__ import annotations

try:  # Django >= 6.0
    from django.tasks import (
        DEFAULT_TASK_BACKEND_ALIAS,
        DEFAULT_TASK_QUEUE_NAME,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        default_task_backend,
        task,
        task_backends,
    )
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import (
        DEFAULT_TASK_PRIORITY,
        TASK_MAX_PRIORITY,
        TASK_MIN_PRIORITY,
        Task,
        TaskError,
    )
    from django.tasks.exceptions import InvalidTask as InvalidTaskError  # renamed in Django
    from django.tasks.exceptions import TaskResultDoesNotExist
    from django.tasks.signals import task_enqueued, task_finished, task_started

    FRAMEWORK = "django.tasks"
except ImportError:  # Django 5.2: the backport
    from django_tasks import (
        DEFAULT_TASK_BACKEND_ALIAS,
        DEFAULT_TASK_QUEUE_NAME,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        default_task_backend,
        task,
        task_backends,
    )
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import (
        DEFAULT_TASK_PRIORITY,
        TASK_MAX_PRIORITY,
        TASK_MIN_PRIORITY,
        Task,
        TaskError,
    )
    from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started

    FRAMEWORK = "django_tasks"

try:  # the backport, also present next to Django 6 in projects that started on 5.2
    from django_tasks.base import Task as BackportTask
except ImportError:
    BackportTask = Task

TASK_CLASSES: tuple[type, ...] = tuple({Task, BackportTask})

__all__ = [
    "DEFAULT_TASK_BACKEND_ALIAS",
    "DEFAULT_TASK_PRIORITY",
    "DEFAULT_TASK_QUEUE_NAME",
    "FRAMEWORK",
    "TASK_CLASSES",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "InvalidTaskError",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "default_task_backend",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
