"""The worker command's options (jobweaver/workers.py): what is refused, in one line."""

from __future__ import annotations

import pytest

from jobweaver.workers import WorkerOptionError, WorkerOptions


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        (WorkerOptions("executor", queues=("GPU",)), "lowercase"),
        (WorkerOptions("executor", queues=("a.b",)), "lowercase"),
        (WorkerOptions("executor", queues=()), "at least one queue"),
        (WorkerOptions("executor", pool="prefork"), "not fork-safe"),
        (WorkerOptions("executor", pool="gevent"), "threads or processes"),
        (WorkerOptions("scheduler", pool="processes"), "for executors"),
        (WorkerOptions("executor", max_tasks_per_child=5), "needs --pool processes"),
        (WorkerOptions("executor", pool="processes", max_memory_per_child=0), "at least 1"),
        (WorkerOptions("executor", concurrency=0), "1 to 512"),
        (WorkerOptions("gardener"), "the role is one of"),
    ],
)
def test_refused_options_say_why(options, reason):
    with pytest.raises(WorkerOptionError, match=reason):
        options.check()


def test_valid_queues_pass():
    options = WorkerOptions("executor", queues=("default", "gpu-2", "reports_eu"))
    assert options.check() is options


def test_the_process_pool_with_its_limits_passes():
    options = WorkerOptions(
        "executor", pool="processes", max_tasks_per_child=100, max_memory_per_child=512
    )
    assert options.check() is options
    assert options.chosen_pool == "processes"


def test_only_executors_take_the_pool_from_the_settings(settings):
    settings.JOBWEAVER_EXECUTOR_POOL = "processes"
    assert WorkerOptions("executor").chosen_pool == "processes"
    assert WorkerOptions("scheduler").check().chosen_pool == "threads"
