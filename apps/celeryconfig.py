"""JobWeaver's Celery configuration, read lazily by jobweaver.celery on first use.

Transport: the kombu_kafka library (per-message offset tracking with a contiguous
commit watermark, keyed and batch-confirmed produce, one consumer per worker process).

Delivery stays at-least-once: a message is acknowledged only after its task returned (acks
late), a worker reserves no more than flow control sends it, and a worker lost mid-task leaves its
message unacknowledged. Remote control, events and results are off: the Kafka transport has no
fanout, and job state lives in PostgreSQL, not in a result backend.
"""

from kombu import Queue

from jobweaver.conf import settings
from jobweaver.core.kafka import RUN_JOB, SCHEDULER, common_config, topic_name

RUN_JOB_QUEUE = topic_name(RUN_JOB)
SCHEDULER_QUEUE = topic_name(SCHEDULER)

# The URL names our transport; the full bootstrap list goes to the transport options.
broker_url = f"jobweaver-kafka://{settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS.split(',')[0].strip()}"
broker_connection_retry_on_startup = True
broker_transport_options = {
    # Short polls: an idle worker notices new work within this time, never seconds later.
    "poll_timeout_seconds": 0.1,
    "topic_partitions": {
        RUN_JOB_QUEUE: settings.JOBWEAVER_RUN_JOB_PARTITIONS,
        SCHEDULER_QUEUE: 1,
    },
    # Commit batches: after this many finished messages or this many seconds.
    "commit_max_messages": 200,
    "commit_interval_seconds": 0.5,
    # Undecodable records are parked here (unchanged, with their origin in headers), not fatal.
    "parked_topic": topic_name("parked"),
    "replication_factor": settings.JOBWEAVER_KAFKA_REPLICATION_FACTOR,
    # All brokers of the cluster, not only the one in the URL, and TLS/SASL when configured.
    "kafka_common_config": common_config(),
}
task_queues = [
    Queue(RUN_JOB_QUEUE, routing_key=RUN_JOB_QUEUE),
    Queue(SCHEDULER_QUEUE, routing_key=SCHEDULER_QUEUE),
]
task_default_queue = SCHEDULER_QUEUE
task_routes = {
    "jobweaver.executor.tasks.*": {"queue": RUN_JOB_QUEUE, "routing_key": RUN_JOB_QUEUE},
    "jobweaver.scheduler.tasks.*": {"queue": SCHEDULER_QUEUE, "routing_key": SCHEDULER_QUEUE},
    "jobweaver.outbox.tasks.*": {"queue": SCHEDULER_QUEUE, "routing_key": SCHEDULER_QUEUE},
    "jobweaver.schedules.tasks.*": {"queue": SCHEDULER_QUEUE, "routing_key": SCHEDULER_QUEUE},
}
# Celery's Django fixup closes every database connection before and after each task unless
# this is set: a new PostgreSQL session per job, connecting a large part of the executor's task
# time (bench/NOTES.md). With it, a thread keeps its connection for this many tasks;
# `close_old_connections` before each task (apps/executor/tasks.py) still applies CONN_MAX_AGE
# and health checks, as Django does per request.
CELERY_DB_REUSE_MAX = 1000
task_acks_late = True
task_reject_on_worker_lost = True
# An executor's Celery reserves records beyond its threads; flow control bounds what it is sent
# (ARCHITECTURE §4a), and reserved ones get their dispatch lease renewed.
worker_prefetch_multiplier = settings.JOBWEAVER_DISPATCH_PREFETCH
worker_enable_remote_control = False
worker_send_task_events = False
task_send_sent_event = False
task_ignore_result = True
result_backend = None
task_serializer = "json"
accept_content = ["json"]
timezone = "UTC"
enable_utc = True
beat_scheduler = "django_celery_beat.schedulers:DatabaseScheduler"
worker_hijack_root_logger = False
