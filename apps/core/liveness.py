"""Liveness of worker processes, for compose and Kubernetes probes: a heartbeat file.

Each worker process touches its file when it shows progress — the executor on every beat of its
presence loop (apps/executor/presence.py), the scheduler after every task it runs (the beat
sends it a dispatch tick every JOBWEAVER_DISPATCH_INTERVAL_SECONDS), beat after every task it
sends — and `python -m jobweaver_site.workers probe ROLE` exits 1 when the file is older than
JOBWEAVER_LIVENESS_MAX_AGE_SECONDS. A file, not a query: the probe starts no Django and opens
no connection, so it stays cheap and says nothing about PostgreSQL or Kafka (a restart would
not fix those; /readyz and the metrics report them).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path

DEFAULT_MAX_AGE_SECONDS = 120.0


def liveness_file(role: str) -> Path:
    """JOBWEAVER_LIVENESS_FILE, else `<tmp>/jobweaver-<role>.alive` (one worker per container)."""
    configured = os.environ.get("JOBWEAVER_LIVENESS_FILE")
    return Path(configured or Path(tempfile.gettempdir()) / f"jobweaver-{role}.alive")


def touch(role: str) -> None:
    # A read-only or missing directory is no reason to stop working: the probe will say so.
    with contextlib.suppress(OSError):
        liveness_file(role).touch()


def age_seconds(role: str) -> float | None:
    """Seconds since the role's file was last touched; None when there is none."""
    try:
        return max(time.time() - liveness_file(role).stat().st_mtime, 0.0)
    except FileNotFoundError:
        return None


def probe(role: str) -> tuple[bool, str]:
    """(alive, reason) for a probe's exit code and message."""
    max_age = float(os.environ.get("JOBWEAVER_LIVENESS_MAX_AGE_SECONDS", DEFAULT_MAX_AGE_SECONDS))
    age = age_seconds(role)
    if age is None:
        return False, f"{role}: no heartbeat file at {liveness_file(role)} (not started yet?)"
    if age > max_age:
        return False, f"{role}: last heartbeat {age:.0f} s ago (limit {max_age:.0f} s)"
    return True, f"{role}: alive, last heartbeat {age:.1f} s ago"
