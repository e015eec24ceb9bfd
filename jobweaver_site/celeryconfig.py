"""Celery configuration, read lazily by jobweaver_site.celery on first use.

Delivery stays at-least-once: a message is acknowledged only after its task returned (acks
late), a worker holds one message at a time (prefetch 1), and a worker lost mid-task leaves its
message unacknowledged. Remote control, events and results are off: the Kafka transport has no
fanout, and job state lives in PostgreSQL, not in a result backend.
"""

from django.conf import settings
from kombu import Queue

from jobweaver_site.kafka import RUN_JOB, SCHEDULER, topic_name

RUN_JOB_QUEUE = topic_name(RUN_JOB)
SCHEDULER_QUEUE = topic_name(SCHEDULER)

broker_url = settings.CELERY_BROKER_URL
broker_connection_retry_on_startup = True
broker_transport_options = {
    # The stock transport uses this both as the poll timeout and as the connect timeout, so it
    # cannot be tiny. poll() returns as soon as a message arrives, and each of our workers
    # consumes one queue, so it bounds only idle waits.
    "wait_time_seconds": 1.0,
    "polling_interval": 0.02,
    "num_partitions": settings.JOBWEAVER_RUN_JOB_PARTITIONS,
    "kafka_consumer_config": {
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 1000,
        # A long job keeps its prefetched message unacknowledged and the transport does not
        # poll meanwhile; the consumer must not be expelled from its group for that.
        "max.poll.interval.ms": 3_600_000,
    },
}
task_queues = [
    Queue(RUN_JOB_QUEUE, routing_key=RUN_JOB_QUEUE),
    Queue(SCHEDULER_QUEUE, routing_key=SCHEDULER_QUEUE),
]
task_default_queue = SCHEDULER_QUEUE
task_routes = {
    "apps.executor.tasks.*": {"queue": RUN_JOB_QUEUE, "routing_key": RUN_JOB_QUEUE},
    "apps.scheduler.tasks.*": {"queue": SCHEDULER_QUEUE, "routing_key": SCHEDULER_QUEUE},
    "apps.outbox.tasks.*": {"queue": SCHEDULER_QUEUE, "routing_key": SCHEDULER_QUEUE},
}
task_acks_late = True
task_reject_on_worker_lost = True
worker_prefetch_multiplier = 1
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
