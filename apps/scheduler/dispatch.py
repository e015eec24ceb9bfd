"""Dispatch: send due executions to the live executors over Kafka (ARCHITECTURE §4, §4a).

A dispatch claims at most the free credits of the live executors (apps/engine/claim/),
highest priority first, in one short transaction under the cluster-wide dispatch lock:
the engine's claim moves them PENDING → DISPATCHED with fresh fencing tokens and
each is assigned to an executor and one of its partitions. The claim commits *before* anything
waits on Kafka, so a stalled broker never pins rows. Then the publisher sends one run_jobs
message per executor partition, with its deliveries, and waits for the broker's confirmation;
if that fails, the deliveries go back to PENDING at once (fenced by their tokens: a message
that reached Kafka after all is ignored by the executor). A dispatcher that dies between commit
and publish leaves DISPATCHED rows whose dispatch lease expires: the rescue redelivers them, no
attempt used.

Dispatch runs on a submit (fast path, in the submitting process), when the scheduler worker is
woken because a credit freed up (apps/scheduler/wakeup.py), and on the beat tick.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple, Protocol

from django.db import transaction

import kombu_kafka
from jobweaver.celery import app
from jobweaver.conf import settings
from jobweaver.core import metrics
from jobweaver.core.kafka import RUN_JOB, event_producer, topic_name
from jobweaver.core.logcontext import log_context
from jobweaver.engine import claim, executions
from jobweaver.engine.claim import credits as claim_credits
from jobweaver.engine.claim import queues as claim_queues
from jobweaver.engine.claim import rules as claim_rules
from jobweaver.scheduler import run_job_message

logger = logging.getLogger(__name__)

# The Celery message header with the job's trace id (read by the executor's task).
TRACE_HEADER = "trace_id"
# "No live executor" is logged at most this often by one process.
NO_EXECUTOR_LOG_INTERVAL_SECONDS = 30.0
# How long warm_up_publisher serves a new Kafka producer (see there).
PRODUCER_ID_WAIT_SECONDS = 1.0


class _Route(NamedTuple):
    job_id: str
    event_id: str
    partition: int | None  # a run-job partition of the executor it is counted against


class Delivery(_Route):
    """One delivery to send, a job of a run_jobs message. The job's trace id rides along as an
    attribute, not a fourth field, so callers keep unpacking (job id, event id, partition)."""

    trace_id: str | None = None
    waited_seconds: float | None = None  # due → dispatched (a metric)

    @classmethod
    def traced(
        cls, job_id: str, event_id: str, partition: int | None, trace_id: str, waited: float
    ) -> Delivery:
        delivery = cls(job_id, event_id, partition)
        delivery.trace_id, delivery.waited_seconds = trace_id, waited
        return delivery


class Publisher(Protocol):
    def __call__(self, messages: list[Delivery]) -> None:
        """Send every delivery on run-job; return once the broker has taken them all, or
        raise."""


def celery_publisher(messages: list[Delivery]) -> None:
    """One run_jobs Celery message over Kafka per executor partition, with every delivery
    going there (a delivery without a partition goes alone, keyed by its job id), confirmed by
    the broker as one batch."""
    queue = topic_name(RUN_JOB)
    with app.producer_or_acquire() as producer:
        channel = producer.channel
        for partition, deliveries in _by_partition(messages):
            run_job_message.publish(
                channel, queue, run_job_message.build(channel, *_record(partition, deliveries))
            )
        kombu_kafka.confirm_deliveries(channel)


def _by_partition(messages: list[Delivery]) -> list[tuple[int | None, list[Delivery]]]:
    """The deliveries per partition, in their order of first appearance; each delivery without
    a partition a group of its own."""
    groups: dict[int, list[Delivery]] = {}
    alone: list[tuple[int | None, list[Delivery]]] = []
    for delivery in messages:
        if delivery.partition is None:
            alone.append((None, [delivery]))
        else:
            groups.setdefault(delivery.partition, []).append(delivery)
    return [*groups.items(), *alone]


def _record(partition: int | None, deliveries: list[Delivery]) -> tuple[list, dict]:
    """The run_jobs arguments and the message headers of one record. Its Kafka key is its first
    job's id (ARCHITECTURE §6; a record of several jobs goes to the partition the dispatcher
    chose, which the key does not decide); the record headers name its jobs, so a lone job's
    record reads as before: jobId, eventId, traceId."""
    first = deliveries[0]
    headers: dict = {kombu_kafka.KEY_HEADER: first.job_id}
    if partition is not None:
        headers[kombu_kafka.PARTITION_HEADER] = partition
    if len(deliveries) == 1:
        # The trace travels in the Celery message (the executor's log context) and on the
        # Kafka record itself, like the domain events' traceId/eventId headers.
        record_headers = {"jobId": first.job_id, "eventId": first.event_id}
        if first.trace_id is not None:
            headers[TRACE_HEADER] = record_headers["traceId"] = first.trace_id
    else:
        record_headers = {
            "jobIds": ",".join(d.job_id for d in deliveries),
            "eventIds": ",".join(d.event_id for d in deliveries),
        }
    headers[kombu_kafka.RECORD_HEADERS_HEADER] = record_headers
    return [[d.job_id, d.event_id, d.trace_id] for d in deliveries], headers


def warm_up_publisher() -> None:
    """Connect this process's run-job producer and the event producer ahead of the first
    publish (a Kafka connection takes a few hundred milliseconds); best effort. Run it in a
    thread of its own: it takes about PRODUCER_ID_WAIT_SECONDS."""
    try:
        with app.producer_or_acquire() as producer:
            # Declaring the queue creates the channel's Kafka clients and learns the topic.
            producer.channel.queue_declare(queue=topic_name(RUN_JOB))
            kafka_producer = producer.channel.producer
        # librdkafka's idempotent producer asks for its producer id on a timer after it
        # starts, and a produce before that waits for it (bench/NOTES.md). Serve the client
        # past that point, after giving the pooled producer back so a dispatch meanwhile uses
        # this one, not a cold one.
        deadline = time.monotonic() + PRODUCER_ID_WAIT_SECONDS
        while time.monotonic() < deadline:
            kafka_producer.poll(0.05)
        event_producer().list_topics(timeout=5)
    except Exception:  # a cold start is only slower; the first publish reports real errors
        logger.info("publisher warm-up failed", exc_info=True)


def dispatch_due_jobs(
    *,
    now: datetime | None = None,
    batch_size: int | None = None,
    job_ids: Iterable[uuid.UUID] | None = None,
    publish: Publisher | None = None,
) -> list[uuid.UUID]:
    """Claim due PENDING executions up to the free credits and send them; returns the job ids.

    Batches of at most JOBWEAVER_DISPATCH_BATCH_SIZE, until the credits or the due work run
    out. `job_ids` limits the claim to some jobs (the fast path after a submit); `now` replaces
    the database clock for what counts as due (tests).
    """
    batch_size = batch_size or settings.JOBWEAVER_DISPATCH_BATCH_SIZE
    publish = publish or celery_publisher
    job_ids = list(job_ids) if job_ids is not None else None
    sent: list[uuid.UUID] = []
    while True:
        deliveries, credits_left, left_for_limits = _claim(
            limit=batch_size, job_ids=job_ids, due_by=now
        )
        if deliveries:
            _publish(deliveries, publish)
            sent.extend(uuid.UUID(d.job_id) for d in deliveries)
        if credits_left <= 0 or not deliveries:
            return sent
        # Claim again while credits are left: after a full batch, and after a claim whose
        # window held more of some key's work than its limit let through (the next claim
        # finds that key blocked and sets its work aside, so the keys below it get their
        # turn now, not at the next wake-up). Each round claims at least one job.
        if len(deliveries) < batch_size and not left_for_limits:
            return sent


def warm_up_dispatch() -> None:
    """The submit fast path's statements, changing nothing: the dispatch lock, the credits and
    the claim of a job id no job has, for a placeholder executor (a web worker may start before
    any executor). A web worker runs it on each request thread's new connection
    (jobweaver.core.db.warm_connection)."""
    _claim(limit=1, job_ids=[uuid.UUID(int=0)], due_by=None, warm_up=True)


@transaction.atomic
def _claim(
    *, limit: int, job_ids: list[uuid.UUID] | None, due_by: datetime | None, warm_up: bool = False
) -> tuple[list[Delivery], int, int]:
    """One batch: count the credits and spend them under the dispatch lock; returns the
    deliveries, the credits still free after them and the rows the claim left for their key's
    limit (`claim.Claims.left_for_limits`). `warm_up`: a placeholder executor's credit stands
    for the live ones (`warm_up_dispatch`)."""
    # The claim's planner settings with the lock, for a claim of given jobs (the fast path)
    # too: its generic plan reads them by job id, as a custom plan does, and the claim of each
    # single submit is no longer planned anew (0.5-0.9 ms; bench/NOTES.md).
    claim.lock_dispatch(planned=True)
    credits, rule_rows, queue_rows = claim_credits.credits_and_rule_rows()
    if warm_up:
        credits = [claim_credits.Credit("warm-up", 1, [0])]
    free = sum(max(credit.free, 0) for credit in credits)
    if free <= 0:
        if not credits:
            _log_no_executor()
        return [], 0, 0
    rules = claim_rules.dispatch_rules(rule_rows)
    if job_ids is None:
        # Keep the line clear of keys at their limit, and give keys with room their work back
        # (apps/engine/claim/rules.py).
        claim.executions_set_aside(rules, batch=claim_rules.SET_ASIDE_BATCH)
        claim.executions_put_back(rules)
    else:
        if rules.put_back:
            # A key with room has work set aside, so this claim leaves that key's new jobs in
            # line; wake the full dispatch to put its work back and send it, rather than
            # leave them to the next wake-up (up to a second with nothing else moving).
            claim.notify_dispatch()
        rules = rules.for_given_jobs()  # the next full dispatch does that
    queue_rules = claim_queues.queue_rules(queue_rows)
    room = claim_queues.rooms(queue_rules)  # the capped queues', lowered as pools claim
    # Each pool of executors (those serving the same queues, ARCHITECTURE §15) claims only its
    # open queues' work, up to its own credits: one claim statement per pool, one with a
    # single pool. Several open queues share the pool's credits by weight (claim.queues).
    deliveries: list[Delivery] = []
    left_for_limits = 0
    for queues, pool in claim_credits.pools(credits):
        limit_left = min(limit - len(deliveries), sum(credit.free for credit in pool))
        shares = claim_queues.shares(
            queues, queue_rules, room, paused=rules.paused_queues, limit=limit_left
        )
        if limit_left <= 0 or not shares:
            continue
        # Where the n-th claim goes, chosen before the claim so that one statement records
        # it: `assign` is sequential, so its first k choices are the same for any count ≥ k.
        targets = claim_credits.assign(min(limit_left, sum(s.room for s in shares)), pool)
        claimed = claim.executions_claim(
            limit=len(targets),
            job_ids=job_ids,
            due_by=due_by,
            rules=rules,
            workers=[worker_id for worker_id, _ in targets],
            planned=job_ids is None,
            queues=[share.name for share in shares],
            shares=shares if len(shares) > 1 else None,
            pool=[credit.worker_id for credit in pool],
        )
        claim_queues.take(room, [one.queue_name for one in claimed])
        deliveries += [
            Delivery.traced(
                str(one.job_id), str(one.event_id), partition, one.trace_id, one.waited_seconds
            )
            for one, (_, partition) in zip(claimed, targets[: len(claimed)], strict=True)
        ]
        left_for_limits += claimed.left_for_limits
    return deliveries, free - len(deliveries), left_for_limits


def _publish(deliveries: list[Delivery], publish: Publisher) -> None:
    try:
        publish(deliveries)
    except Exception:
        # Whatever the error, these deliveries are not known to be on Kafka: hand them back
        # at once rather than wait for their dispatch lease. Then let the caller see it.
        with transaction.atomic():
            executions.executions_unsend([uuid.UUID(d.event_id) for d in deliveries])
        raise
    metrics.JOBS_DISPATCHED.inc(len(deliveries))
    for delivery in deliveries:
        if delivery.waited_seconds is not None:
            metrics.DISPATCH_WAIT.observe(delivery.waited_seconds)
        with log_context(trace_id=delivery.trace_id, job_id=delivery.job_id):
            logger.info(
                "job %s dispatched: delivery %s on partition %s",
                delivery.job_id,
                delivery.event_id,
                delivery.partition,
            )


_last_no_executor_log = 0.0


def _log_no_executor() -> None:
    global _last_no_executor_log
    now = time.monotonic()
    if now - _last_no_executor_log >= NO_EXECUTOR_LOG_INTERVAL_SECONDS:
        _last_no_executor_log = now
        logger.warning("no live executor: nothing is dispatched until one registers")


def dispatch_job_now(job_id: uuid.UUID) -> None:
    """Fast path after a submit or retry commits: dispatch this job at once if it is due and a
    credit is free.

    Best effort: on any broker error the job stays PENDING and the next dispatch sends it.
    """
    try:
        dispatch_due_jobs(job_ids=[job_id])
    except Exception:  # the beat tick is the safety net; the error is logged with its traceback
        logger.warning(
            "fast-path dispatch of job %s failed; beat will retry", job_id, exc_info=True
        )
