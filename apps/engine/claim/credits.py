"""Flow control's credits (ARCHITECTURE §4a): how much each live executor may be sent.

An executor's credits are its slots x its prefetch minus the executions dispatched to it or
running on it. Its prefetch is JOBWEAVER_DISPATCH_PREFETCH, or more, up to
JOBWEAVER_DISPATCH_PREFETCH_MAX, when it reports more with its heartbeat: an executor whose jobs
are short asks for a deeper line (apps/executor/window.py), bounded here by this process's
settings; the dispatcher claims at most the sum, highest priority
first, and sends each delivery to a partition of the executor it was counted against, so an
idle executor takes work while a busy one holds no more than it can start. Whenever a credit
frees up, the transaction that freed it NOTIFYs the dispatcher (the mover does, from the
transition table); the beat tick is the safety net.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from jobweaver.conf import settings
from jobweaver.core.db import assert_in_transaction
from jobweaver.engine.store import claim as claim_rows


@dataclass
class Credit:
    worker_id: str
    free: int
    partitions: list[int]
    queues: tuple[str, ...] = ("default",)  # the job queues the executor serves (§15)


def prefetch_bounds() -> tuple[int, int]:
    """The fewest and the most deliveries a slot an executor is given (a maximum below the
    minimum is the minimum: a fixed prefetch)."""
    low = settings.JOBWEAVER_DISPATCH_PREFETCH
    return low, max(low, settings.JOBWEAVER_DISPATCH_PREFETCH_MAX)


def window_sql(alias: str) -> str:
    """SQL: the credits of the executor registration `alias` when nothing is in flight (its
    slots x its prefetch within the bounds)."""
    return f"{alias}.slots * {claim_rows.window_prefetch_sql(alias, *prefetch_bounds())}"


def _settings() -> dict:
    low, high = prefetch_bounds()
    return {
        "prefetch": low,
        "prefetch_max": high,
        "ttl_seconds": settings.JOBWEAVER_WORKER_TTL_SECONDS,
    }


def credits() -> list[Credit]:
    """Free credits of every live executor of run-job that owns partitions; inside the
    dispatch transaction (after `lock_dispatch`) so no other dispatcher spends them, or as a
    reading for the metrics."""
    return credits_from(claim_rows.credits(**_settings()))


def credits_and_rule_rows() -> tuple[list[Credit], list, list]:
    """The credits, the rules' first rows (claim.rules.dispatch_rules takes them) and the
    queues' settings (claim.queues.queue_rules takes them), read in one statement after the
    dispatch lock."""
    assert_in_transaction("credits_and_rule_rows")
    credit_rows, rule_rows, queue_rows = claim_rows.credits_and_rules(**_settings())
    return credits_from(credit_rows), rule_rows, queue_rows


def credits_from(rows) -> list[Credit]:
    return [
        Credit(worker_id, free, _json(parts), tuple(sorted(_json(queues))))
        for worker_id, free, parts, queues in rows
    ]


def _json(value):
    return json.loads(value) if isinstance(value, str) else value


def pools(credits: list[Credit]) -> list[tuple[tuple[str, ...], list[Credit]]]:
    """Pure: the executors grouped by the queues they serve, each pool with free credits, in a
    stable order. The dispatcher claims for each pool only work of its queues."""
    by_queues: dict[tuple[str, ...], list[Credit]] = {}
    for credit in credits:
        if credit.free > 0 and credit.partitions:
            by_queues.setdefault(credit.queues, []).append(credit)
    return sorted(by_queues.items())


def assign(count: int, credits: list[Credit]) -> list[tuple[str, int]]:
    """Pure: (worker id, partition) for each of `count` deliveries, in order, always taking
    the executor with the most free credits (ties by worker id), so executors of different
    sizes fill in proportion.

    One call's deliveries to an executor all go to one of its partitions: the producer sends a
    request per partition and the consumer fetches per partition (bench/NOTES.md). Which
    partition rotates from call to call with the executor's free credits, so successive single
    dispatches (the submit fast path) spread over its partitions."""
    free = {credit.worker_id: credit.free for credit in credits}
    partition = {
        credit.worker_id: credit.partitions[max(credit.free, 0) % len(credit.partitions)]
        for credit in credits
        if credit.partitions
    }
    chosen: list[tuple[str, int]] = []
    for _ in range(count if free else 0):
        worker_id = max(sorted(free), key=free.__getitem__)
        if free[worker_id] <= 0:
            break
        chosen.append((worker_id, partition[worker_id]))
        free[worker_id] -= 1
    return chosen
