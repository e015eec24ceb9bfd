"""Reads of the dispatch controls: pauses and concurrency limits, and their one outside shape
(camelCase, times in ISO-8601 UTC) shared by the API, the command line and the dashboard."""

from __future__ import annotations

from jobweaver.core.timeutil import iso
from jobweaver.scheduler.models import ConcurrencyLimit, Pause


def pause_list() -> list[Pause]:
    """Every pause, by scope and name."""
    return list(Pause.objects.order_by("scope", "name"))


def concurrency_limit_list() -> list[ConcurrencyLimit]:
    """Every concurrency limit, by pattern."""
    return list(ConcurrencyLimit.objects.order_by("pattern"))


def pause_to_dict(pause: Pause) -> dict:
    return {
        "scope": pause.scope,
        "name": pause.name,
        "reason": pause.reason,
        "pausedBy": pause.paused_by,
        "pausedAt": iso(pause.paused_at),
    }


def limit_to_dict(limit: ConcurrencyLimit) -> dict:
    return {
        "pattern": limit.pattern,
        "maxRunning": limit.max_running,
        "maxPerSecond": limit.max_per_second,
        "updatedAt": iso(limit.updated_at),
    }
