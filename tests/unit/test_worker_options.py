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
        (WorkerOptions("executor", pool="processes"), "not available yet"),
        (WorkerOptions("executor", pool="prefork"), "threads or processes"),
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
