"""The task registry (apps/jobs/python_tasks/registry.py): built from installed apps' tasks
modules, looked up by path, never importing a path it is asked about."""

from __future__ import annotations

import sys
import types

from jobweaver.jobs.python_tasks.registry import (
    registered_paths,
    registry_build,
    registry_get,
    tasks_defined_in,
)
from jobweaver_site.examples import tasks as example_tasks

EXAMPLES = [
    f"jobweaver_site.examples.tasks.{name}"
    for name in (
        "add",
        "always_fails",
        "async_add",
        "async_sleep",
        "crash",
        "fib",
        "flaky",
        "nightly_digest",
        "picky",
        "sleep",
        "snoozer",
        "spin",
        "sum_list",
        "sum_parents",
    )
]


def test_the_examples_are_registered_at_start_up():
    assert set(EXAMPLES) <= set(registered_paths())
    assert registry_get("jobweaver_site.examples.tasks.add") is example_tasks.add


def test_only_task_objects_of_installed_apps_tasks_modules_are_registered():
    paths = registered_paths()
    # Celery's tasks modules of our own apps are imported too, but hold no DEP 14 task.
    assert not [p for p in paths if p.startswith(("jobweaver.executor.", "jobweaver.scheduler."))]
    # Plain functions and imported names are not tasks.
    assert registry_get("jobweaver_site.examples.tasks.time") is None
    assert registry_get("jobweaver_site.examples.tasks.task") is None


def test_a_module_registers_what_it_defines_not_what_it_imports():
    module = types.ModuleType("somewhere.tasks")
    module.add = example_tasks.add  # imported from elsewhere
    module.helper = lambda: None

    assert tasks_defined_in(module) == {}
    assert tasks_defined_in(example_tasks) == {path: registry_get(path) for path in EXAMPLES}


def test_lookups_never_import():
    for path in (
        "os.system",
        "subprocess.check_output",
        "jobweaver.jobs.tests.unit.never_imported.boom",
        "jobweaver_site.examples.tasks.nope",
    ):
        assert registry_get(path) is None
    assert "jobweaver.jobs.tests.unit.never_imported" not in sys.modules


def test_building_again_gives_the_same_registry():
    before = registered_paths()

    rebuilt = registry_build()

    assert sorted(rebuilt) == before == registered_paths()
