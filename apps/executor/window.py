"""How many deliveries a slot this executor asks the dispatcher for (ARCHITECTURE §4a, issue 34).

Its credits are slots x prefetch. A fixed prefetch is wrong one way or the other: short jobs end
before a freed credit comes back as a new delivery (the ending's NOTIFY, the dispatcher's claim,
Kafka: several milliseconds), so their slots wait with nothing in line; long jobs with a deep
line keep what waits there from a later queue or a higher priority for as long as the line
takes. So the line is kept in time, not in count: each slot's line holds about LINE_SECONDS of
work, by the mean time a slot spends on a job here, between JOBWEAVER_DISPATCH_PREFETCH and
JOBWEAVER_DISPATCH_PREFETCH_MAX. The presence thread reports it with the heartbeat, and at once
when it changes (apps/executor/presence.py); the dispatcher's credits read it.
"""

from __future__ import annotations

import math
import threading

from jobweaver.engine.claim.credits import prefetch_bounds

# The work each slot's line should hold: about a credit's round trip under load
# (bench/NOTES.md), so a slot that ends a job finds the next one waiting.
LINE_SECONDS = 0.025
# The weight of each job's time in the running mean: about the last 20 jobs count.
SMOOTHING = 0.05


def prefetch_for(mean_seconds: float | None, low: int, high: int) -> int:
    """Pure: the deliveries a slot for jobs that take `mean_seconds` of a slot's time (None:
    none ran yet): the one running and LINE_SECONDS of them in line, within [low, high]."""
    if mean_seconds is None:
        return low
    wanted = 1 + math.ceil(LINE_SECONDS / max(mean_seconds, 1e-6))
    return max(low, min(high, wanted))


class Window:
    def __init__(self):
        self._lock = threading.Lock()
        self.mean_seconds: float | None = None

    def ran(self, seconds: float) -> None:
        """A slot was held `seconds` by one job (from taking it to its work's end)."""
        with self._lock:
            if self.mean_seconds is None:
                self.mean_seconds = seconds
            else:
                self.mean_seconds += SMOOTHING * (seconds - self.mean_seconds)

    def prefetch(self) -> int:
        return prefetch_for(self.mean_seconds, *prefetch_bounds())


_window = Window()


def ran(seconds: float) -> None:
    _window.ran(seconds)


def prefetch() -> int:
    """The deliveries a slot this process asks for now."""
    return _window.prefetch()


def reset() -> None:
    """Forget the jobs seen (a test's fresh start)."""
    global _window
    _window = Window()
