"""Every JobWeaver setting and its default, in one place (ARCHITECTURE §14).

A host project sets any of these as a Django setting of the same name; what it leaves out takes
the default here. JobWeaver's modules read them through `jobweaver.conf.settings`, which looks
a JOBWEAVER_* name up in Django's settings first (so `override_settings` and pytest-django's
`settings` fixture apply) and falls back to `DEFAULTS`; every other name is Django's own.
Environment variables are read by the reference site's settings only (jobweaver_site), which
maps them onto these names.
"""

from __future__ import annotations

from django.conf import settings as django_settings

DEFAULTS: dict[str, object] = {
    # Kafka: the brokers, a topic prefix (tests and shared dev brokers), partitions, replicas,
    # and librdkafka settings for TLS/SASL given to every client.
    "JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092",
    "JOBWEAVER_KAFKA_TOPIC_PREFIX": "",
    "JOBWEAVER_RUN_JOB_PARTITIONS": 12,
    "JOBWEAVER_KAFKA_REPLICATION_FACTOR": 1,
    "JOBWEAVER_KAFKA_CLIENT_CONFIG": {},
    # PostgreSQL session bounds (also applied to the connection by the reference site).
    "JOBWEAVER_DB_LOCK_TIMEOUT_SECONDS": 10.0,
    "JOBWEAVER_DB_STATEMENT_TIMEOUT_SECONDS": 60.0,
    "JOBWEAVER_DB_IDLE_IN_TRANSACTION_TIMEOUT_SECONDS": 60.0,
    # Dispatch and flow control (§4a), leases, retries (§5).
    "JOBWEAVER_DISPATCH_INTERVAL_SECONDS": 10.0,
    "JOBWEAVER_DISPATCH_BATCH_SIZE": 50,
    "JOBWEAVER_DISPATCH_PREFETCH": 2,
    # Issue 34: an executor whose jobs are short asks for up to this many deliveries a slot,
    # so its slots do not wait for a credit's round trip (apps/executor/window.py).
    "JOBWEAVER_DISPATCH_PREFETCH_MAX": 16,
    "JOBWEAVER_DISPATCH_TIMEOUT_SECONDS": 300.0,
    "JOBWEAVER_WORKER_HEARTBEAT_SECONDS": 5.0,
    "JOBWEAVER_WORKER_TTL_SECONDS": 15.0,
    "JOBWEAVER_LEASE_SECONDS": 30.0,
    "JOBWEAVER_RESCUE_INTERVAL_SECONDS": 10.0,
    "JOBWEAVER_BACKOFF_BASE_SECONDS": 5.0,
    "JOBWEAVER_BACKOFF_CAP_SECONDS": 300.0,
    "JOBWEAVER_BACKOFF_JITTER": 0.1,
    # Multiplies a task's own retry_backoff (§13a), so tests can shrink time.
    "JOBWEAVER_BACKOFF_SCALE": 1.0,
    # Snoozes per job (§13a); past them the job dead-letters.
    "JOBWEAVER_MAX_SNOOZES": 100,
    "JOBWEAVER_OUTBOX_RELAY_INTERVAL_SECONDS": 5.0,
    # Retention: days a finished job (or a published event) is kept; 0 keeps it forever.
    "JOBWEAVER_RETAIN_COMPLETED_DAYS": 7.0,
    "JOBWEAVER_RETAIN_FAILED_DAYS": 30.0,
    "JOBWEAVER_RETAIN_CANCELLED_DAYS": 30.0,
    "JOBWEAVER_RETAIN_PUBLISHED_OUTBOX_DAYS": 1.0,
    # Published outbox rows are deleted once Kafka confirms them; True keeps them, marked
    # published, until JOBWEAVER_RETAIN_PUBLISHED_OUTBOX_DAYS prunes them.
    "JOBWEAVER_OUTBOX_KEEP_PUBLISHED": False,
    "JOBWEAVER_PRUNE_INTERVAL_SECONDS": 300.0,
    "JOBWEAVER_PRUNE_BATCH_SIZE": 1000,
    # Recurring schedules.
    "JOBWEAVER_SCHEDULES_INTERVAL_SECONDS": 1.0,
    "JOBWEAVER_SCHEDULES_MISFIRE_GRACE_SECONDS": 60.0,
    # §17: how often a schedule made through the API, the admin or the CLI may fire at most.
    "JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS": 60.0,
    # §17: schedules a user may own (operators are exempt); 0 is no limit.
    "JOBWEAVER_MAX_SCHEDULES_PER_USER": 100,
    # Submission limits (§7, §8) and fairness.
    "JOBWEAVER_MAX_STEPS": 100,
    "JOBWEAVER_MAX_REQUEST_BYTES": 64 * 1024,
    "JOBWEAVER_MAX_RETRY_COUNT": 25,
    "JOBWEAVER_MAX_TIMEOUT_SECONDS": 86400,
    "JOBWEAVER_DEFAULT_MAX_RETRY_COUNT": 3,
    "JOBWEAVER_DEFAULT_TIMEOUT_SECONDS": 300,
    "JOBWEAVER_API_MAX_PAGE_SIZE": 100,
    "JOBWEAVER_MAX_BATCH_JOBS": 1000,
    "JOBWEAVER_MAX_BATCH_REQUEST_BYTES": 2 * 1024 * 1024,
    "JOBWEAVER_MAX_JSON_DEPTH": 32,
    "JOBWEAVER_MAX_RUN_AT_DAYS": 3650.0,
    "JOBWEAVER_MAX_SIMULATED_SECONDS_PER_JOB": 3600.0,
    # §17: what one job may hold a slot for — COMPUTE work, and a TASK's timeoutSeconds.
    "JOBWEAVER_MAX_COMPUTE_ITERATIONS_PER_JOB": 100_000_000,
    "JOBWEAVER_MAX_TASK_TIMEOUT_SECONDS": 3600,
    "JOBWEAVER_MAX_IDEMPOTENCY_KEY_CHARS": 255,
    # The per-user token bucket (apps/accounts/throttle.py): RATE requests per WINDOW_SECONDS
    # sustained (20 a second), up to BURST at once.
    "JOBWEAVER_SUBMIT_THROTTLE_RATE": 1200,
    "JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS": 60.0,
    "JOBWEAVER_SUBMIT_THROTTLE_BURST": 500,
    "JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER": 10000,
    "JOBWEAVER_PRIORITY_PERMISSION_ABOVE": 6,
    # §17: at most this many of one user's jobs dispatched or running at once; 0: no cap.
    "JOBWEAVER_MAX_RUNNING_JOBS_PER_USER": 0,
    # A new API token expires after this many days unless created otherwise; 0: never (§17).
    "JOBWEAVER_API_TOKEN_DEFAULT_DAYS": 90,
    # Python tasks (§13).
    "JOBWEAVER_TASK_MAX_PAYLOAD_BYTES": 32 * 1024,
    "JOBWEAVER_TASK_MAX_RESULT_BYTES": 256 * 1024,
    # Workflows (§16).
    "JOBWEAVER_MAX_WORKFLOW_JOBS": 1000,
    "JOBWEAVER_MAX_WORKFLOW_EDGES_PER_JOB": 1000,
    # Workers.
    "JOBWEAVER_EXECUTOR_CONCURRENCY": 4,
    # The job queues an executor serves (ARCHITECTURE §15); `--queues` on its command line.
    "JOBWEAVER_EXECUTOR_QUEUES": ["default"],
    "JOBWEAVER_SHUTDOWN_GRACE_SECONDS": 30.0,
    # The process pool (`--pool processes`, ARCHITECTURE §13a); 0 is no limit.
    "JOBWEAVER_EXECUTOR_POOL": "threads",
    "JOBWEAVER_EXECUTOR_MAX_TASKS_PER_CHILD": 0,
    "JOBWEAVER_EXECUTOR_MAX_MEMORY_PER_CHILD_MB": 0,
    # Issue 34: at most this many successes in one statement of an executor's writer.
    "JOBWEAVER_EXECUTOR_WRITE_BATCH": 100,
    # Issue 34: how long an attempt taken from a busy executor's line may run before its start
    # is written; one that succeeds sooner writes its start with its ending. 0: every start is
    # written before the work.
    "JOBWEAVER_EXECUTOR_START_DELAY_MS": 50,
    "JOBWEAVER_HARD_TIMEOUT_GRACE_SECONDS": 10.0,
    "JOBWEAVER_LOG_LEVEL": "INFO",
    # Probes and metrics.
    "JOBWEAVER_READYZ_KAFKA_TIMEOUT_SECONDS": 1.0,
    "JOBWEAVER_READYZ_KAFKA_CACHE_SECONDS": 5.0,
    "JOBWEAVER_READYZ_DB_TIMEOUT_SECONDS": 1.0,
    # A worker's metrics listener: its port (0 = off) and address; every metrics endpoint
    # needs the bearer token and answers 404 while none is set (§17).
    "JOBWEAVER_METRICS_PORT": 0,
    "JOBWEAVER_METRICS_BIND": "127.0.0.1",
    "JOBWEAVER_METRICS_TOKEN": "",
    # The web's /metrics reads Kafka's consumer lag at most this often per process.
    "JOBWEAVER_METRICS_KAFKA_CACHE_SECONDS": 5.0,
}


class _Settings:
    """Django's settings, with JobWeaver's defaults under the names the host did not set."""

    def __getattr__(self, name: str):
        try:
            return getattr(django_settings, name)
        except AttributeError:
            if name in DEFAULTS:
                return DEFAULTS[name]
            raise

    def __setattr__(self, name: str, value) -> None:
        setattr(django_settings, name, value)


settings = _Settings()
