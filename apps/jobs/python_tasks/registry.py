"""The task registry: the only functions a TASK job can run.

Built once at start-up (`TasksConfig.ready`, in every process: web, workers, commands) from the
`tasks` module of each installed app: every task object (`@task`) defined there is registered
under its module path, e.g. `jobweaver_site.examples.tasks.add`. Afterwards a path is only
ever *looked up* here. A path that arrives from a client — an API body, `submit_job --task`, a
stored job — is never imported and never resolved with `import_string`, so `os.system` or a
module that happens to be importable is simply "not registered". Only installed apps' own code
can register a task, by defining it in its `tasks` module.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging

from django.apps import apps

from jobweaver.jobs.python_tasks.compat import TASK_CLASSES, Task

logger = logging.getLogger(__name__)

TASKS_MODULE = "tasks"

_registered: dict[str, Task] = {}


def registry_build() -> dict[str, Task]:
    """Import each installed app's `tasks` module (if it has one) and register the tasks it
    defines. Called once at start-up; safe to call again (it rebuilds)."""
    found: dict[str, Task] = {}
    for app_config in apps.get_app_configs():
        module_name = f"{app_config.name}.{TASKS_MODULE}"
        # find_spec looks at the app's own package (imported already) without importing the
        # submodule; an app without a tasks module is skipped.
        if importlib.util.find_spec(module_name) is None:
            continue
        module = importlib.import_module(module_name)
        found.update(tasks_defined_in(module))
    _registered.clear()
    _registered.update(found)
    logger.debug("task registry: %s", ", ".join(sorted(found)) or "empty")
    return dict(found)


def tasks_defined_in(module) -> dict[str, Task]:
    """The task objects a module defines (not those it merely imports), by module path."""
    return {
        value.module_path: value
        for value in vars(module).values()
        if isinstance(value, TASK_CLASSES) and value.func.__module__ == module.__name__
    }


def registry_get(path: str) -> Task | None:
    """The registered task at `path`, or None. Never imports anything."""
    return _registered.get(path)


def registered_paths() -> list[str]:
    return sorted(_registered)


def registry_add(task: Task) -> None:
    """Register one task by hand (tests, or a project that keeps tasks elsewhere)."""
    _registered[task.module_path] = task


def registry_remove(task: Task) -> None:
    _registered.pop(task.module_path, None)
