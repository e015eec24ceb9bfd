"""JobWeaver's own Celery app (ARCHITECTURE §14): every JobWeaver message goes through this app
object, never through `celery.current_app` or the host project's default app, so a host with
its own Celery app (any broker) neither captures JobWeaver's work nor is changed by it.

Every message travels over Kafka through the kombu_kafka transport (ARCHITECTURE §6); the
configuration is jobweaver.celeryconfig, read lazily on first use. Celery's own retry machinery
is not used for jobs: retries, backoff and dead letters are the engine's (apps/engine/).
"""

from celery import Celery

import kombu_kafka

kombu_kafka.register()

app = Celery("jobweaver", set_as_current=False)
app.config_from_object("jobweaver.celeryconfig")
app.autodiscover_tasks(
    ["jobweaver.scheduler", "jobweaver.executor", "jobweaver.outbox", "jobweaver.schedules"]
)
