"""JobWeaver's system checks (`manage.py check`, ARCHITECTURE §14): a misconfiguration is one
clear line at start-up, not a traceback at the first job.

    jobweaver.E001  the default database is not PostgreSQL (the queue needs SKIP LOCKED, NOTIFY)
    jobweaver.E002  JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS is empty or not host:port[,host:port]
    jobweaver.E003  no TASKS backend is JobWeaver's while jobweaver.tasks is installed
    jobweaver.E004  a JOBWEAVER_* setting is out of its range
    jobweaver.W001  more live executors than run-job partitions (some would idle); database tag
"""

from __future__ import annotations

import re

from django.apps import apps
from django.core.checks import Error, Tags, Warning, register
from django.db import DatabaseError, connections

from jobweaver.conf import settings
from jobweaver.scheduler.flow import live_executors

BOOTSTRAP = re.compile(r"^[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")
BACKEND = "jobweaver.tasks.JobWeaverBackend"
BACKEND_PATHS = {BACKEND, "jobweaver.tasks.backend.JobWeaverBackend"}

# (setting, lowest, highest): None is unbounded.
RANGES = (
    ("JOBWEAVER_RUN_JOB_PARTITIONS", 1, 10_000),
    ("JOBWEAVER_KAFKA_REPLICATION_FACTOR", 1, 16),
    ("JOBWEAVER_DISPATCH_BATCH_SIZE", 1, 100),  # psycopg keeps 100 prepared statements a session
    ("JOBWEAVER_DISPATCH_PREFETCH", 1, 100),
    ("JOBWEAVER_DISPATCH_PREFETCH_MAX", 1, 100),
    ("JOBWEAVER_DISPATCH_INTERVAL_SECONDS", 0.01, None),
    ("JOBWEAVER_DISPATCH_TIMEOUT_SECONDS", 0.1, None),
    ("JOBWEAVER_LEASE_SECONDS", 0.1, None),
    ("JOBWEAVER_WORKER_HEARTBEAT_SECONDS", 0.01, None),
    ("JOBWEAVER_WORKER_TTL_SECONDS", 0.01, None),
    ("JOBWEAVER_RESCUE_INTERVAL_SECONDS", 0.01, None),
    ("JOBWEAVER_BACKOFF_BASE_SECONDS", 0, None),
    ("JOBWEAVER_BACKOFF_CAP_SECONDS", 0, None),
    ("JOBWEAVER_BACKOFF_JITTER", 0, 1),
    ("JOBWEAVER_EXECUTOR_CONCURRENCY", 1, 512),
    ("JOBWEAVER_EXECUTOR_MAX_TASKS_PER_CHILD", 0, None),
    ("JOBWEAVER_EXECUTOR_MAX_MEMORY_PER_CHILD_MB", 0, None),
    ("JOBWEAVER_HARD_TIMEOUT_GRACE_SECONDS", 0, None),
    ("JOBWEAVER_EXECUTOR_WRITE_BATCH", 1, 1000),
    ("JOBWEAVER_EXECUTOR_START_DELAY_MS", 0, 60_000),
    ("JOBWEAVER_MAX_RETRY_COUNT", 0, 1000),
    ("JOBWEAVER_DEFAULT_MAX_RETRY_COUNT", 0, 1000),
    ("JOBWEAVER_MAX_TIMEOUT_SECONDS", 1, None),
    ("JOBWEAVER_DEFAULT_TIMEOUT_SECONDS", 1, None),
    ("JOBWEAVER_MAX_BATCH_JOBS", 1, 100_000),
    ("JOBWEAVER_MAX_STEPS", 1, 100_000),
    ("JOBWEAVER_MAX_WORKFLOW_JOBS", 1, 100_000),
    ("JOBWEAVER_MAX_WORKFLOW_EDGES_PER_JOB", 1, 100_000),
    ("JOBWEAVER_SUBMIT_THROTTLE_RATE", 1, None),
    ("JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS", 0.001, None),
    ("JOBWEAVER_SUBMIT_THROTTLE_BURST", 1, None),
    ("JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS", 1, 366 * 86400),  # slots.MAX_INTERVAL_SECONDS
    ("JOBWEAVER_MAX_SCHEDULES_PER_USER", 0, None),
    ("JOBWEAVER_MAX_RUNNING_JOBS_PER_USER", 0, None),
    ("JOBWEAVER_METRICS_PORT", 0, 65_535),
    ("JOBWEAVER_METRICS_KAFKA_CACHE_SECONDS", 0, 3600),
    ("JOBWEAVER_API_TOKEN_DEFAULT_DAYS", 0, 3650),
)


@register(Tags.compatibility)
def check_database(app_configs=None, **kwargs) -> list:
    engine = connections.settings["default"].get("ENGINE", "") if connections.settings else ""
    if "postgresql" not in engine:
        return [
            Error(
                f"JobWeaver needs PostgreSQL (14 or later) as the default database, not {engine!r}",
                hint="Set DATABASES['default']['ENGINE'] to 'django.db.backends.postgresql'.",
                id="jobweaver.E001",
            )
        ]
    return []


@register(Tags.compatibility)
def check_kafka(app_configs=None, **kwargs) -> list:
    value = settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS
    servers = [part.strip() for part in value.split(",")] if isinstance(value, str) else []
    if not servers or not all(BOOTSTRAP.match(server) for server in servers):
        return [
            Error(
                f"JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS must be host:port[,host:port…], not {value!r}",
                id="jobweaver.E002",
            )
        ]
    return []


@register(Tags.compatibility)
def check_tasks_backend(app_configs=None, **kwargs) -> list:
    if not apps.is_installed("jobweaver.tasks"):
        return []
    tasks = getattr(settings, "TASKS", {}) or {}
    if not any(alias.get("BACKEND") in BACKEND_PATHS for alias in tasks.values()):
        return [
            Error(
                "jobweaver.tasks is installed but no TASKS backend is JobWeaver's: enqueued "
                "tasks would not run as JobWeaver jobs",
                hint=f'TASKS = {{"default": {{"BACKEND": "{BACKEND}"}}}}',
                id="jobweaver.E003",
            )
        ]
    return []


@register(Tags.compatibility)
def check_ranges(app_configs=None, **kwargs) -> list:
    errors = []
    for name, lowest, highest in RANGES:
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            errors.append(Error(f"{name} must be a number, not {value!r}", id="jobweaver.E004"))
        elif value < lowest or (highest is not None and value > highest):
            bounds = f"at least {lowest}" if highest is None else f"{lowest} to {highest}"
            errors.append(Error(f"{name} must be {bounds}, not {value}", id="jobweaver.E004"))
    if settings.JOBWEAVER_WORKER_TTL_SECONDS <= settings.JOBWEAVER_WORKER_HEARTBEAT_SECONDS:
        errors.append(
            Error(
                "JOBWEAVER_WORKER_TTL_SECONDS must be longer than "
                "JOBWEAVER_WORKER_HEARTBEAT_SECONDS, or live executors would look dead",
                id="jobweaver.E004",
            )
        )
    return errors


@register(Tags.database)
def check_partitions(app_configs=None, databases=None, **kwargs) -> list:
    """With `check --database default`: each executor needs a run-job partition of its own."""
    if not databases or "default" not in databases:
        return []
    try:
        live = len(live_executors())
    except DatabaseError:
        return []
    partitions = settings.JOBWEAVER_RUN_JOB_PARTITIONS
    if live > partitions:
        return [
            Warning(
                f"{live} live executors share {partitions} run-job partitions: "
                f"{live - partitions} of them get no work",
                hint="Raise JOBWEAVER_RUN_JOB_PARTITIONS (topics only grow) or run fewer.",
                id="jobweaver.W001",
            )
        ]
    return []
