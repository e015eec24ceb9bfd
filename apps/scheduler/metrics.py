"""Cluster-wide gauges, computed at scrape time from PostgreSQL and Kafka (served by the web's
/metrics): jobs by status, the oldest due job's age, per queue its due work and the age of its
oldest (what an autoscaler of a pool scales on: the Helm chart's KEDA ScaledObject), live
executors, their slots and free credits (ARCHITECTURE §4a), and the consumer lag of each
run-job and scheduler partition.

They describe the whole deployment, not one process, so only the web serves them; with several
web replicas every replica reports the same values (use max() in queries, not sum()). Consumer
lag is measured from outside the consumer group — committed offsets against the log end — so
it keeps rising while every executor is stopped, which is when it matters. Reading it opens
short-lived Kafka clients (an admin and two consumers per topic), so a process reads it at most
once per JOBWEAVER_METRICS_KAFKA_CACHE_SECONDS and concurrent scrapes share that one reading.
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import KafkaException
from django.db import connection, transaction
from django.db.models import Count
from django.db.utils import DatabaseError
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

import kombu_kafka
from jobweaver.conf import settings
from jobweaver.core.kafka import RUN_JOB, SCHEDULER, common_config, topic_name
from jobweaver.engine.claim import credits as claim_credits
from jobweaver.scheduler import flow
from jobweaver.scheduler.models import PENDING_DUE_ROWS, ExecutionStatus, JobExecution
from jobweaver.scheduler.selectors import queue_due_work, waiting_queues

logger = logging.getLogger(__name__)

_lag_lock = threading.Lock()
# (monotonic time of the reading, ((topic, group, partition, records), ...) or the error)
_lag_reading: tuple[float, tuple | KafkaException] | None = None

# The database clock as a value (a scalar subquery, read once): compared with the volatile
# clock_timestamp() itself, `next_run_at` was checked row by row along jw_execution_pending_due,
# so a scrape with nothing due read every delayed job (apps/scheduler/retention.py's cutoff).
OLDEST_DUE_SQL = (
    "SELECT EXTRACT(EPOCH FROM clock_timestamp() - min(next_run_at)) "
    f"FROM {JobExecution._meta.db_table} "
    f"WHERE {PENDING_DUE_ROWS} AND next_run_at <= (SELECT clock_timestamp())"
)


def oldest_due_seconds() -> float:
    """Age of the oldest PENDING execution that is due (0 when none waits), database clock."""
    with connection.cursor() as cursor:
        cursor.execute(OLDEST_DUE_SQL)
        (age,) = cursor.fetchone()
    return max(float(age or 0), 0.0)


class ClusterCollector(Collector):
    def collect(self):
        up = GaugeMetricFamily(
            "jobweaver_metrics_source_up",
            "1 when the scrape could read this source of cluster gauges",
            labels=["source"],
        )
        try:
            yield from database_gauges()
            up.add_metric(["postgresql"], 1)
        except DatabaseError as exc:
            logger.warning("metrics: PostgreSQL gauges unavailable: %s", exc)
            up.add_metric(["postgresql"], 0)
        try:
            yield self._lag()
            up.add_metric(["kafka"], 1)
        except KafkaException as exc:
            logger.warning("metrics: Kafka consumer lag unavailable: %s", exc)
            up.add_metric(["kafka"], 0)
        yield up

    def _lag(self) -> GaugeMetricFamily:
        lag = GaugeMetricFamily(
            "jobweaver_kafka_consumer_lag",
            "Records after the consumer group's committed offset, per partition",
            labels=["topic", "group", "partition"],
        )
        for topic, group, partition, records in consumer_lag():
            lag.add_metric([topic, group, str(partition)], records)
        return lag


def consumer_lag() -> tuple[tuple[str, str, int, int], ...]:
    """(topic, group, partition, records) of run-job and the scheduler's topic, read from Kafka
    at most once per JOBWEAVER_METRICS_KAFKA_CACHE_SECONDS in this process (a failed reading
    too: a broker that is away costs one timeout per period, not one per scrape). Raises the
    reading's KafkaException."""
    global _lag_reading
    with _lag_lock:
        cached = _lag_reading
        if cached is None or time.monotonic() - cached[0] >= (
            settings.JOBWEAVER_METRICS_KAFKA_CACHE_SECONDS
        ):
            try:
                reading: tuple | KafkaException = _read_consumer_lag()
            except KafkaException as exc:
                reading = exc
            cached = _lag_reading = (time.monotonic(), reading)
    if isinstance(cached[1], KafkaException):
        raise KafkaException(*cached[1].args)  # a new one: the cached one keeps its traceback
    return cached[1]


def _read_consumer_lag() -> tuple[tuple[str, str, int, int], ...]:
    rows = []
    for base in (RUN_JOB, SCHEDULER):
        topic = topic_name(base)
        group = kombu_kafka.default_group_id((topic,))
        lags = kombu_kafka.partition_lag(common_config(), topic, group)
        rows += [(topic, group, partition, records) for partition, records in sorted(lags.items())]
    return tuple(rows)


def database_gauges() -> list[GaugeMetricFamily]:
    """The gauges read from PostgreSQL (the collector's first source)."""
    counts = dict(JobExecution.objects.values_list("status").annotate(count=Count("id")).order_by())
    jobs = GaugeMetricFamily("jobweaver_jobs", "Jobs by status", labels=["status"])
    for status in ExecutionStatus:
        jobs.add_metric([status.value], counts.get(status.value, 0))
    live = flow.live_executors()
    served = {queue for executor in live for queue in executor.queues}
    unserved = GaugeMetricFamily(
        "jobweaver_queue_without_executor",
        "1 for a queue with waiting work that no live executor serves, 0 when one does",
        labels=["queue"],
    )
    for queue in waiting_queues():
        unserved.add_metric([queue], 0 if queue in served else 1)
    waiting = GaugeMetricFamily(
        "jobweaver_queue_waiting",
        "Due PENDING jobs of a queue (a queue without a series has none)",
        labels=["queue"],
    )
    oldest = GaugeMetricFamily(
        "jobweaver_queue_oldest_due_age_seconds",
        "How long the oldest due PENDING job of a queue has waited",
        labels=["queue"],
    )
    for queue, (count, age) in sorted(queue_due_work().items()):
        waiting.add_metric([queue], count)
        oldest.add_metric([queue], age)
    with transaction.atomic():  # credits are counted inside a transaction (no lock: a read)
        free = sum(max(credit.free, 0) for credit in claim_credits.credits())
    return [
        jobs,
        unserved,
        waiting,
        oldest,
        GaugeMetricFamily(
            "jobweaver_oldest_due_job_age_seconds",
            "How long the oldest due PENDING job has waited (0 when none)",
            value=oldest_due_seconds(),
        ),
        GaugeMetricFamily(
            "jobweaver_live_executors", "Executors with a fresh heartbeat", value=len(live)
        ),
        GaugeMetricFamily(
            "jobweaver_executor_slots",
            "Slots (threads) of the live executors",
            value=sum(executor.slots for executor in live),
        ),
        GaugeMetricFamily(
            "jobweaver_dispatch_credits_free",
            "Deliveries the dispatcher may still send to live executors (flow control)",
            value=free,
        ),
    ]
