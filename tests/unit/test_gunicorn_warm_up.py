"""A new gunicorn worker warms up before it takes requests (jobweaver_site/gunicorn.conf.py):
it waits for its Kafka producer's warm-up, up to a bound, and has imported its views."""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path

import pytest

CONF = Path(__file__).resolve().parents[2] / "jobweaver_site" / "gunicorn.conf.py"


@pytest.fixture
def conf(monkeypatch, tmp_path):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # the conf would make one
    # Not this test process's collector (tests/unit/test_collector.py tests that part).
    monkeypatch.setattr("jobweaver.core.collector.settle_after_start", lambda: None)
    spec = importlib.util.spec_from_file_location("gunicorn_conf_under_test", CONF)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def slow_publisher(monkeypatch, seconds: float) -> threading.Event:
    """The producer's warm-up replaced by one that takes `seconds`; the event is set when it
    has finished."""
    finished = threading.Event()

    def warm_up_publisher():
        threading.Event().wait(seconds)  # the broker connection and producer id, simulated
        finished.set()

    monkeypatch.setattr("jobweaver.scheduler.dispatch.warm_up_publisher", warm_up_publisher)
    return finished


def test_the_worker_takes_requests_once_its_producer_is_warm(conf, monkeypatch):
    finished = slow_publisher(monkeypatch, 0.3)

    conf.post_worker_init(worker=None)

    assert finished.is_set()  # not a warm-up left running behind the first request


def test_a_producer_that_cannot_warm_up_delays_the_worker_only_up_to_the_bound(conf, monkeypatch):
    """With the broker away the worker serves anyway: a submit goes to PostgreSQL."""
    monkeypatch.setattr(conf, "WARM_UP_WAIT_SECONDS", 0.2)
    finished = slow_publisher(monkeypatch, 3)

    started = time.monotonic()
    conf.post_worker_init(worker=None)

    assert time.monotonic() - started < 2
    assert not finished.is_set()
