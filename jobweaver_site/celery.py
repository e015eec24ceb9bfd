"""The one Celery app of the project. All of its wiring to Kafka is in celeryconfig.py.

Every Celery message travels over Kafka (ARCHITECTURE §6). Celery's own retry machinery is not
used for jobs; retries, backoff and dead letters are domain logic in apps/scheduler.
"""

import os

from celery import Celery

import kombu_kafka

# Our own Kafka transport (the kombu_kafka library), used by every Celery process.
kombu_kafka.register()

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobweaver_site.settings")

app = Celery("jobweaver")
# Lazy: the configuration module reads Django settings on first use, not at import time.
app.config_from_object("jobweaver_site.celeryconfig")
app.autodiscover_tasks(
    ["jobweaver.scheduler", "jobweaver.executor", "jobweaver.outbox", "jobweaver.schedules"]
)
