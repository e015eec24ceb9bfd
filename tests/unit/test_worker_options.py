"""The worker command's options (jobweaver/workers.py): what is refused, in one line."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

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


def test_the_command_refuses_prefork_with_exit_2_and_the_reason():
    with pytest.raises(CommandError, match="not fork-safe") as refused:
        call_command("jobweaver", "worker", "executor", "--pool", "prefork")
    assert refused.value.returncode == 2


def test_the_process_pool_runs_under_celery_s_threads_pool(capsys, settings):
    """The parent's Celery pool stays threads, one per delivery flow control may let the
    executor hold (3 slots x the most deliveries a slot); the slot threads lend each attempt a
    child."""
    settings.JOBWEAVER_DISPATCH_PREFETCH, settings.JOBWEAVER_DISPATCH_PREFETCH_MAX = 2, 8
    call_command(
        "jobweaver", "worker", "executor", "--pool", "processes", "--concurrency", "3", "--dry-run"
    )
    assert "--pool threads --concurrency 24" in capsys.readouterr().out
