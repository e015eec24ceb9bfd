"""Settings for the test session: the dev stack's PostgreSQL and Kafka, shrunk time, and a topic
prefix of its own per session so runs never see each other's messages.

The values go into os.environ *before* the base settings read them, so the worker processes
that the tests start (they inherit the environment) run with exactly the same settings.
"""

import os
import uuid

TEST_ENVIRONMENT = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": "test-only-secret-key",
    # The test client and the workers' probes speak plain HTTP to the app.
    "JOBWEAVER_SECURE_SSL_REDIRECT": "0",
    "JOBWEAVER_KAFKA_TOPIC_PREFIX": f"test-{uuid.uuid4().hex[:8]}-",
    "JOBWEAVER_DISPATCH_INTERVAL_SECONDS": "0.25",
    "JOBWEAVER_OUTBOX_RELAY_INTERVAL_SECONDS": "1",
    "JOBWEAVER_BACKOFF_BASE_SECONDS": "0.2",
    "JOBWEAVER_BACKOFF_CAP_SECONDS": "5",
    "JOBWEAVER_BACKOFF_JITTER": "0.1",
    # A task's own backoff (retry_backoff) in hundredths: seconds become 10 ms.
    "JOBWEAVER_BACKOFF_SCALE": "0.01",
    "JOBWEAVER_LEASE_SECONDS": "3",
    # Flow control keeps Kafka's queue short, so a short dispatch lease holds under any
    # backlog; an expired one is a redelivery, never a failed attempt.
    "JOBWEAVER_DISPATCH_TIMEOUT_SECONDS": "5",
    "JOBWEAVER_WORKER_HEARTBEAT_SECONDS": "0.5",
    "JOBWEAVER_WORKER_TTL_SECONDS": "2",
    "JOBWEAVER_RESCUE_INTERVAL_SECONDS": "0.5",
    "JOBWEAVER_SHUTDOWN_GRACE_SECONDS": "2",
    # Schedules of a second fire within a test (the minimum's own tests raise it again).
    "JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS": "1",
    # The process pool kills a child 1 s after its timeout asked it to stop.
    "JOBWEAVER_HARD_TIMEOUT_GRACE_SECONDS": "1",
    # The tests read the outbox to see which events a change wrote (and that it wrote each
    # once), after the relay published them too; the relay's own tests cover the default,
    # which deletes a published row (apps/outbox/tests/test_relay.py).
    "JOBWEAVER_OUTBOX_KEEP_PUBLISHED": "1",
    # Every metrics endpoint needs a token (§17): the tests scrape with this one.
    "JOBWEAVER_METRICS_TOKEN": "test-metrics-token",
    # Consumer lag read on every scrape (tests watch it move); the cache's test sets its own.
    "JOBWEAVER_METRICS_KAFKA_CACHE_SECONDS": "0",
    # The test stack's executors serve every queue the suite's jobs use (ARCHITECTURE §15);
    # the routing tests start executors of other pools for queues outside this list.
    "JOBWEAVER_EXECUTOR_QUEUES": (
        "default,bulk,reports,mail,imports,emails,a,b,q1,paused-bulk,paused-other,paused-race"
    ),
}
for _name, _value in TEST_ENVIRONMENT.items():
    os.environ.setdefault(_name, _value)

from django.conf import global_settings  # noqa: E402

from jobweaver_site.settings import *  # noqa: E402,F403

# Test users get a fast password hash: Django's default (PBKDF2, a million rounds) cost about
# 0.6 s per user created, a sixth of the suite's time. Passwords hashed by the defaults still
# verify (they follow); production settings keep Django's own list.
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    *global_settings.PASSWORD_HASHERS,
]

# A database of its own per session, so two test sessions on one machine never collide.
DATABASES["default"]["TEST"] = {  # noqa: F405
    "NAME": "test_jobweaver_" + os.environ["JOBWEAVER_KAFKA_TOPIC_PREFIX"].strip("-").split("-")[-1]
}
