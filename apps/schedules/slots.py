"""When a schedule fires: its slots and the misfire decision. Pure: no Django, no ORM.

A *slot* is one instant (UTC) at which a schedule is due. A cron rule's slots are the wall-clock
times its expression matches in its IANA time zone (5-field cron, evaluated by cronsim); an
interval rule's slots are `anchor + k * seconds`, plain elapsed time, unaffected by DST.

DST, for cron rules (cronsim's semantics, which are Debian cron's):

- A job at a fixed time of day (neither the minute nor the hour field starts with `*`, e.g.
  `30 2 * * *`) follows the wall clock. On spring-forward day a time that does not exist (02:30
  in Europe/Berlin or America/New_York) runs once, at the first minute after the gap (03:00
  local); several times inside the gap (`0,30 2 * * *`) coalesce into that one run. On
  fall-back day a time that occurs twice (02:30 in Berlin, 01:30 in New York) runs once, at its
  first occurrence (summer time).
- A job whose minute or hour field starts with `*` (`*/15 * * * *`, `30 * * * *`) follows
  elapsed time: an hourly job runs in both copies of the repeated hour and has no run in the
  hour that does not exist.

Misfires: a slot that is due is *on time* while `now - slot <= grace`, *missed* after that
(the beat was down, or the schedule's owner could not submit). On every firing each on-time
slot is submitted once. Missed slots follow the schedule's policy: SKIP submits none of them;
CATCH_UP_ONCE submits one job, for the latest missed slot. Either way the schedule then
continues at its first slot after `now`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, available_timezones

from cronsim import CronSim, CronSimError

SKIP = "SKIP"
CATCH_UP_ONCE = "CATCH_UP_ONCE"
MISFIRE_POLICIES = (SKIP, CATCH_UP_ONCE)
MAX_CRON_CHARS = 200
MAX_INTERVAL_SECONDS = 366 * 86400


class InvalidRule(ValueError):
    """A cron expression, time zone or interval that cannot make a schedule."""


@dataclass(frozen=True)
class CronRule:
    expression: str
    time_zone: str = "UTC"

    def __post_init__(self):
        if not isinstance(self.expression, str) or not self.expression.strip():
            raise InvalidRule("cron must be a non-empty string")
        if len(self.expression) > MAX_CRON_CHARS:
            raise InvalidRule(f"cron must be at most {MAX_CRON_CHARS} characters")
        if len(self.expression.split()) != 5:
            # Six fields (seconds) are cronsim's extension, outside Debian cron's DST rules.
            raise InvalidRule(
                "cron must have 5 fields (minute hour day-of-month month day-of-week), got "
                f"{len(self.expression.split())}"
            )
        if not isinstance(self.time_zone, str) or self.time_zone not in _time_zones():
            raise InvalidRule(f"timeZone must be an IANA time zone name, got {self.time_zone!r}")
        try:
            CronSim(self.expression, datetime(2000, 1, 1, tzinfo=self.zone))
        except CronSimError as exc:
            raise InvalidRule(f"cron {self.expression!r} is invalid: {exc}") from None

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.time_zone)


@dataclass(frozen=True)
class IntervalRule:
    seconds: int

    def __post_init__(self):
        if type(self.seconds) is not int or not 1 <= self.seconds <= MAX_INTERVAL_SECONDS:
            raise InvalidRule(
                f"intervalSeconds must be an integer from 1 to {MAX_INTERVAL_SECONDS}"
            )

    @property
    def step(self) -> timedelta:
        return timedelta(seconds=self.seconds)


Rule = CronRule | IntervalRule


def _time_zones() -> set[str]:
    global _TIME_ZONES
    if _TIME_ZONES is None:
        _TIME_ZONES = available_timezones() | {"UTC"}
    return _TIME_ZONES


_TIME_ZONES: set[str] | None = None


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError("slots are computed from aware datetimes only")
    return moment.astimezone(UTC)


def _cron_slots(rule: CronRule, after: datetime) -> Iterator[datetime]:
    """The rule's slots strictly after `after`, in order. cronsim iterates fixed-time rules on
    the naive wall clock, so started inside a repeated hour it can yield that hour's first
    copy, which lies before `after`: such a slot is not after, and is dropped."""
    after = _utc(after)
    for local in CronSim(rule.expression, after.astimezone(rule.zone)):
        slot = local.astimezone(UTC)
        if slot > after:
            yield slot


def first_slot(rule: Rule, *, now: datetime) -> datetime:
    """A new (or resumed, or redefined) schedule's first slot: for cron, its first match after
    `now`; for an interval, one interval after `now` (whole seconds)."""
    now = _utc(now)
    if isinstance(rule, IntervalRule):
        return now.replace(microsecond=0) + rule.step
    return next_slot(rule, after=now)


def next_slot(rule: Rule, *, after: datetime, anchor: datetime | None = None) -> datetime:
    """The first slot strictly after `after`. An interval rule's slots are `anchor + k * seconds`
    (anchor: any one of its slots, by default `after` itself)."""
    after = _utc(after)
    if isinstance(rule, IntervalRule):
        anchor = after if anchor is None else _utc(anchor)
        steps = (after - anchor) // rule.step + 1  # exact: timedelta // timedelta is an int
        return anchor + steps * rule.step
    try:
        return next(_cron_slots(rule, after))
    except StopIteration:  # cronsim finds no match within 50 years
        raise InvalidRule(
            f"cron {rule.expression!r} never matches after {after:%Y-%m-%d}"
        ) from None


def _latest_slot_before(rule: Rule, *, before: datetime, anchor: datetime) -> datetime:
    """The latest slot strictly before `before`, given a slot `anchor` < `before`."""
    if isinstance(rule, IntervalRule):
        steps = -((anchor - before) // rule.step) - 1  # ceil((before - anchor) / step) - 1
        return anchor + steps * rule.step
    # cronsim's reverse iteration jumps there in a few steps; on the naive wall clock it can
    # land early (inside a repeated hour), so walk forward from it to the exact answer.
    try:
        candidate = next(CronSim(rule.expression, before.astimezone(rule.zone), reverse=True))
        start = max(anchor, candidate.astimezone(UTC))
    except StopIteration:
        start = anchor
    latest = start
    for slot in _cron_slots(rule, start):
        if slot >= before:
            break
        latest = slot
    return latest


@dataclass(frozen=True)
class FireDecision:
    submit: tuple[datetime, ...]  # the slots to submit now, oldest first
    next_run_at: datetime  # the first slot after now
    missed_from: datetime | None = None  # the first and last missed slot, when any was missed
    missed_until: datetime | None = None


def plan_firing(
    rule: Rule,
    *,
    next_run_at: datetime,
    now: datetime,
    policy: str,
    grace: timedelta,
) -> FireDecision:
    """What to submit at `now` for a schedule whose earliest unsubmitted slot is `next_run_at`
    (see the module's docstring for the misfire rules)."""
    if policy not in MISFIRE_POLICIES:
        raise ValueError(f"unknown misfire policy {policy!r}")
    next_run_at, now = _utc(next_run_at), _utc(now)
    if next_run_at > now:
        return FireDecision(submit=(), next_run_at=next_run_at)
    horizon = now - grace  # slots before it are missed
    submit: list[datetime] = []
    missed_from = missed_until = None
    if next_run_at < horizon:
        missed_from = next_run_at
        missed_until = _latest_slot_before(rule, before=horizon, anchor=next_run_at)
        if policy == CATCH_UP_ONCE:
            submit.append(missed_until)
        slot = next_slot(rule, after=missed_until, anchor=next_run_at)
    else:
        slot = next_run_at
    while slot <= now:  # the on-time slots: at most grace / interval of them
        submit.append(slot)
        slot = next_slot(rule, after=slot, anchor=next_run_at)
    return FireDecision(
        submit=tuple(submit),
        next_run_at=slot,
        missed_from=missed_from,
        missed_until=missed_until,
    )


# Enough slots to see a cron rule's pattern of a day whole (a minute field of `*`: 1,440).
CLOSEST_SLOTS_LOOKAHEAD = 1441


def closest_slots_seconds(rule: Rule, *, after: datetime) -> float:
    """The shortest time between two consecutive slots of `rule`: an interval's seconds; for a
    cron rule, the closest two of its slots within a day of its first one after `after` (every
    firing day repeats the minute and hour fields, so that day holds the closest pair). A rule
    without a second slot gives infinity."""
    if isinstance(rule, IntervalRule):
        return float(rule.seconds)
    upcoming = _cron_slots(rule, after)
    first = previous = next(upcoming, None)
    shortest = float("inf")
    if first is None:
        return shortest
    for count, slot in enumerate(upcoming, start=2):
        shortest = min(shortest, (slot - previous).total_seconds())
        previous = slot
        if slot - first > timedelta(days=1) or count >= CLOSEST_SLOTS_LOOKAHEAD:
            break
    return shortest


def slot_key(schedule_id: object, slot: datetime) -> str:
    """The idempotency key of one slot's job: the same slot always maps to the same key."""
    return f"schedule:{schedule_id}:{_utc(slot).strftime('%Y-%m-%dT%H:%M:%SZ')}"
