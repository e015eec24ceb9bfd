"""Session-wide fixtures: a database whose writes other processes see (`live_db`) and real
worker processes (`stack`) started once per session and reused by every integration test."""

from __future__ import annotations

import os
import uuid

import pytest
from confluent_kafka.admin import AdminClient
from hypothesis import settings as hypothesis_settings

from tests.stack import WorkerProcess, child_environment, stop_together, wait_for

# Generated tests (the schemathesis runs over the API) draw the same examples in every `make
# test`, so a red run is reproducible rather than a roll of the dice; `make fuzz` draws new
# ones, more of them. No .hypothesis/ directory in the work tree either way.
hypothesis_settings.register_profile("repeatable", derandomize=True, max_examples=40, database=None)
hypothesis_settings.register_profile(
    "fuzz", max_examples=int(os.environ.get("JOBWEAVER_FUZZ_EXAMPLES", "400")), database=None
)
hypothesis_settings.load_profile(os.environ.get("JOBWEAVER_HYPOTHESIS_PROFILE", "repeatable"))


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker, request):
    """pytest-django creates the test database only when a collected test uses `db` or the
    `django_db` mark. A session of live-database tests alone (one integration module, say)
    would otherwise run against the development database: create the test database then too."""
    from django.db import connection
    from django.test.utils import setup_databases, teardown_databases

    test_name = connection.settings_dict["TEST"]["NAME"]
    if connection.settings_dict["NAME"] == test_name:
        yield
        _end_other_sessions(django_db_blocker)  # before pytest-django drops the database
        return
    with django_db_blocker.unblock():
        created = setup_databases(
            verbosity=request.config.option.verbose, interactive=False, aliases={"default"}
        )
    assert connection.settings_dict["NAME"] == test_name
    try:
        yield
    finally:
        _end_other_sessions(django_db_blocker)
        with django_db_blocker.unblock():
            teardown_databases(created, verbosity=request.config.option.verbose)


def _end_other_sessions(django_db_blocker) -> None:
    """Worker processes, server threads and this process's outbox relay thread (which keeps
    its session for a few idle seconds) may still be connected: DROP DATABASE would fail."""
    from django.db import connection

    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.fixture
def live_db(django_db_setup, django_db_blocker):
    """Database access in autocommit, as in production: what a test writes commits at once and
    worker processes see it. Tests using it must only assert on their own jobs."""
    with django_db_blocker.unblock():
        yield


class Stack:
    def __init__(self):
        self.executors: list[WorkerProcess] = []
        self.scheduler: WorkerProcess | None = None
        self.beat: WorkerProcess | None = None

    def start_executor(
        self, name: str | None = None, *, threads: int | None = None, **options
    ) -> WorkerProcess:
        """Start one more executor (`threads` overrides its concurrency; `options` go to
        WorkerProcess, e.g. env or module) and wait until it is ready."""
        env = options.pop("env", None)
        if threads is not None:
            env = {**(env or child_environment()), "JOBWEAVER_EXECUTOR_CONCURRENCY": str(threads)}
        worker = WorkerProcess(
            "executor", name or f"executor{len(self.executors) + 1}", env, **options
        )
        self.executors.append(worker.start())
        worker.wait_ready()
        return worker

    def all(self) -> list[WorkerProcess]:
        return [p for p in [*self.executors, self.scheduler, self.beat] if p is not None]


@pytest.fixture(scope="session")
def stack(django_db_setup, django_db_blocker):
    """Scheduler worker, beat and one executor, ready to run jobs (a probe job has completed)."""
    from django.conf import settings

    from jobweaver.core.kafka import common_config, ensure_topics
    from jobweaver.scheduler.beat import beat_schedule_setup

    ensure_topics()
    with django_db_blocker.unblock():
        beat_schedule_setup()
    running = Stack()
    try:
        running.scheduler = WorkerProcess("scheduler", "scheduler").start()
        running.beat = WorkerProcess("beat", "beat").start()
        for process in (running.scheduler, running.beat):
            process.wait_ready()
        running.start_executor()
        with django_db_blocker.unblock():
            _wait_for_probe_job()
        yield running
    finally:
        stop_together(running.all())
        admin = AdminClient(common_config())
        prefix = settings.JOBWEAVER_KAFKA_TOPIC_PREFIX
        ours = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
        if prefix and ours:
            for future in admin.delete_topics(ours, operation_timeout=10).values():
                future.result(timeout=15)


def _wait_for_probe_job() -> None:
    """The consumer groups are formed once a job has gone all the way through."""
    from jobweaver.jobs.services import job_submit
    from jobweaver.jobs.validation import parse_job_request
    from jobweaver.scheduler.models import JobExecution

    job = job_submit(
        spec=parse_job_request(
            {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "probe"}]}}
        )
    ).job
    wait_for(
        lambda: JobExecution.objects.get(job_id=job.id).status == "COMPLETED",
        timeout=90,
        message=f"probe job {job.id} to complete",
    )


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:10]


def pytest_collection_modifyitems(config, items):
    """Tests that restart PostgreSQL or Kafka run last, so they cannot disturb the others."""
    items.sort(key=lambda item: item.get_closest_marker("restarts_infrastructure") is not None)
