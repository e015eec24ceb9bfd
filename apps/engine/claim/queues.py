"""Queues' settings in the claim (ARCHITECTURE §15): a global cap on a queue's work in flight,
and the share of a pool's credits each of its queues gets.

The rule, per pool of executors serving the same queues (credits.pools):
- a queue that is paused, or whose work dispatched or running (on any executor) has reached its
  `max_running`, takes nothing; the others may take up to their room under the cap;
- one open queue: the pool's credits go to its work, best priority first (the one-line claim);
- several: each credit goes to the queue whose work in flight on the pool, counting what this
  claim already gave it, is lowest for its weight: (in flight + n - 1) / weight for its n-th
  job, ties to the heavier queue. It compares the work before the slot, not after: as slots
  free one at a time, the latter kept about two jobs more in flight for the heavier queue than
  its share. That is water-filling on the work in flight, so while queues wait, the pool's
  slots are shared in proportion to the weights; a queue with nothing due takes nothing and
  leaves its share to the others in the same statement. Within a queue, priority then due
  time order its work as before.

It keeps no state between dispatches (no deficit counters to store and age): the work in flight
is the memory, counted by the shared claim itself under the dispatch lock, so a dispatch whose
pools serve one queue each reads nothing more than before queues had weights.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_WEIGHT = 1


@dataclass(frozen=True)
class QueueRule:
    """A queue's settings as the claim reads them, with its work in flight on every executor
    (counted only when it has a cap)."""

    name: str
    max_running: int | None
    weight: int
    in_flight: int = 0

    @property
    def room(self) -> int | None:
        """How many more of its jobs may be sent now; None: no cap."""
        return None if self.max_running is None else max(self.max_running - self.in_flight, 0)


@dataclass(frozen=True)
class Share:
    """One open queue of a pool in a claim: its weight and how many of its jobs this claim may
    take at most (its work in flight on the pool's executors is counted by the claim)."""

    name: str
    weight: int
    room: int


def queue_rules(rows) -> dict[str, QueueRule]:
    """From the rows (name, max_running, weight, in flight) the credits statement reads."""
    return {
        name: QueueRule(name, max_running, weight, in_flight or 0)
        for name, max_running, weight, in_flight in rows
    }


def rooms(rules: dict[str, QueueRule]) -> dict[str, int]:
    """Each capped queue's room now; the dispatcher lowers it as its pools claim."""
    return {name: rule.room for name, rule in rules.items() if rule.room is not None}


def shares(
    queues: tuple[str, ...],
    rules: dict[str, QueueRule],
    room: dict[str, int],
    *,
    paused: tuple[str, ...],
    limit: int,
) -> list[Share]:
    """Pure: the open queues of a pool (served, not paused, room under the cap), each with its
    weight and what it may take of `limit`."""
    opened = []
    for name in queues:
        if name in paused:
            continue
        rule = rules.get(name)
        cap = min(room.get(name, limit), limit)
        if cap <= 0:
            continue
        opened.append(Share(name, rule.weight if rule else DEFAULT_WEIGHT, cap))
    return opened


def take(room: dict[str, int], claimed_queues: list[str]) -> None:
    """Lower the capped queues' room by what a pool just claimed of them."""
    for name in claimed_queues:
        if name in room:
            room[name] -= 1
