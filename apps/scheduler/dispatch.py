"""Dispatch: send due executions to the executors over Kafka (ARCHITECTURE §4, §4a).

Each batch is one transaction: `lifecycle.executions_dispatch` claims due executions (PENDING →
DISPATCHED, fresh fencing tokens), then the publisher sends one run_job message per job and
waits for the broker's confirmation *before* the transaction commits. If Kafka refuses, the
transaction rolls back and the jobs stay PENDING. A message whose transaction then fails to
commit carries an event id that never became current, so the executor's fenced claim ignores
it; an executor that receives a message before the commit blocks on the row lock and then sees
the committed state.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from celery import current_app
from django.conf import settings
from django.db import transaction

import kombu_kafka
from apps.core.db import drain_in_batches
from apps.core.kafka import RUN_JOB, topic_name
from apps.scheduler import lifecycle

logger = logging.getLogger(__name__)

# The executor's task, named rather than imported: the scheduler never imports the executor's
# runtime (ARCHITECTURE §2).
RUN_JOB_TASK = "apps.executor.tasks.run_job"


class Publisher(Protocol):
    def __call__(self, messages: list[tuple[str, str]]) -> None:
        """Send every (job id, event id) on run-job; return once the broker has taken them all,
        or raise."""


def celery_publisher(messages: list[tuple[str, str]]) -> None:
    """One run_job Celery message per job over Kafka, keyed by job id (one job's messages stay
    in order on one partition), confirmed by the broker as one batch."""
    queue = topic_name(RUN_JOB)
    with current_app.producer_or_acquire() as producer:
        for job_id, event_id in messages:
            current_app.send_task(
                RUN_JOB_TASK,
                args=[job_id, event_id],
                queue=queue,
                routing_key=queue,
                producer=producer,
                headers={kombu_kafka.KEY_HEADER: job_id},
            )
        kombu_kafka.confirm_deliveries(producer.channel)


def dispatch_due_jobs(
    *,
    now: datetime | None = None,
    batch_size: int | None = None,
    job_ids: Iterable[uuid.UUID] | None = None,
    publish: Publisher | None = None,
) -> list[uuid.UUID]:
    """Claim due PENDING executions and send them to the executors; returns the job ids.

    Works in batches of JOBWEAVER_DISPATCH_BATCH_SIZE, each its own transaction. `job_ids`
    limits the claim to some jobs (the fast path after a submit); `now` replaces the database
    clock for what counts as due (tests).
    """
    batch_size = batch_size or settings.JOBWEAVER_DISPATCH_BATCH_SIZE
    publish = publish or celery_publisher
    job_ids = list(job_ids) if job_ids is not None else None
    return drain_in_batches(
        lambda: _dispatch_batch(limit=batch_size, job_ids=job_ids, due_by=now, publish=publish),
        batch_size,
    )


@transaction.atomic
def _dispatch_batch(
    *, limit: int, job_ids: list[uuid.UUID] | None, due_by: datetime | None, publish: Publisher
) -> list[uuid.UUID]:
    claimed = lifecycle.executions_dispatch(limit=limit, job_ids=job_ids, due_by=due_by)
    if claimed:
        publish([(str(job_id), str(event_id)) for job_id, event_id in claimed])
    return [job_id for job_id, _ in claimed]


def dispatch_job_now(job_id: uuid.UUID) -> None:
    """Fast path after a submit or retry commits: dispatch this job at once if it is due.

    Best effort: on any broker error the job stays PENDING and the next beat tick sends it.
    """
    try:
        dispatch_due_jobs(job_ids=[job_id])
    except Exception:  # the beat tick is the safety net; the error is logged with its traceback
        logger.warning(
            "fast-path dispatch of job %s failed; beat will retry", job_id, exc_info=True
        )
