"""What this executor process knows of the pauses (§15), for the deliveries it accepted.

With JOBWEAVER_EXECUTOR_START_DELAY_MS on, a busy executor accepts the deliveries in its line
(apps/executor/runner.py), and a pause's own statement leaves accepted rows alone: one may be
running before its start is written, and only its executor knows which. So the executor gives
back what waits in its line for a paused queue or job type itself (`runner.give_back_paused`).
The presence thread reads the pauses when a pause or a resume commits (their NOTIFY), and at
every heartbeat in case one was missed; a slot looks here before it runs an accepted delivery.
The pause waits until no accepted delivery of its scope is left (apps/scheduler/services.py).
"""

from __future__ import annotations

import threading

from jobweaver.scheduler.models import PauseScope
from jobweaver.scheduler.selectors import pause_list

_lock = threading.Lock()
_queues: frozenset[str] = frozenset()
_job_types: frozenset[str] = frozenset()


def refresh() -> None:
    """Read the pauses (one query)."""
    pauses = pause_list()
    known(
        queues=[p.name for p in pauses if p.scope == PauseScope.QUEUE],
        job_types=[p.name for p in pauses if p.scope == PauseScope.JOB_TYPE],
    )


def known(*, queues: list[str], job_types: list[str]) -> None:
    global _queues, _job_types
    with _lock:
        _queues, _job_types = frozenset(queues), frozenset(job_types)


def paused(queue_name: str, job_type: str) -> bool:
    """Whether work of this queue or this job type was paused, as last read."""
    with _lock:
        return queue_name in _queues or job_type in _job_types
