"""The slot arithmetic and the misfire decision (apps/schedules/slots.py): DST change days in
Europe/Berlin and America/New_York, intervals, and SKIP / CATCH_UP_ONCE after downtime."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from jobweaver.schedules.slots import (
    CATCH_UP_ONCE,
    SKIP,
    CronRule,
    IntervalRule,
    InvalidRule,
    closest_slots_seconds,
    first_slot,
    next_slot,
    plan_firing,
    slot_key,
)

GRACE = timedelta(seconds=60)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def slots_between(rule, start: datetime, end: datetime) -> list[datetime]:
    found, slot = [], next_slot(rule, after=start)
    while slot <= end:
        found.append(slot)
        slot = next_slot(rule, after=slot)
    return found


def test_daily_0230_in_berlin_runs_once_on_spring_forward_day_at_0300_local():
    rule = CronRule("30 2 * * *", "Europe/Berlin")

    slots = slots_between(rule, utc(2026, 3, 27), utc(2026, 3, 31))

    # 02:30 CET = 01:30Z; on 29 March 02:00-03:00 does not exist: 03:00 CEST = 01:00Z.
    assert slots == [
        utc(2026, 3, 27, 1, 30),
        utc(2026, 3, 28, 1, 30),
        utc(2026, 3, 29, 1, 0),
        utc(2026, 3, 30, 0, 30),
    ]


def test_daily_0230_in_berlin_runs_once_on_fall_back_day_at_the_first_occurrence():
    rule = CronRule("30 2 * * *", "Europe/Berlin")

    slots = slots_between(rule, utc(2026, 10, 23), utc(2026, 10, 27))

    # 25 October: 02:30 occurs at 00:30Z (CEST) and again at 01:30Z (CET); only the first.
    assert slots == [
        utc(2026, 10, 23, 0, 30),
        utc(2026, 10, 24, 0, 30),
        utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 26, 1, 30),
    ]


def test_new_york_0130_runs_once_on_fall_back_day():
    rule = CronRule("30 1 * * *", "America/New_York")

    slots = slots_between(rule, utc(2026, 10, 31), utc(2026, 11, 3))

    assert slots == [utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]


def test_times_inside_the_gap_coalesce_into_one_run():
    rule = CronRule("0,30 2 * * *", "America/New_York")

    slots = slots_between(rule, utc(2026, 3, 8), utc(2026, 3, 9))

    assert slots == [utc(2026, 3, 8, 7, 0)]  # 03:00 EDT, once


def test_an_hourly_job_follows_elapsed_time_across_both_changes():
    rule = CronRule("30 * * * *", "America/New_York")

    fall = slots_between(rule, utc(2026, 11, 1, 4), utc(2026, 11, 1, 8))
    spring = slots_between(rule, utc(2026, 3, 8, 5), utc(2026, 3, 8, 8))

    # 01:30 EDT and 01:30 EST both run; 02:30 on spring-forward day does not exist.
    assert fall == [utc(2026, 11, 1, h, 30) for h in (4, 5, 6, 7)]
    assert spring == [utc(2026, 3, 8, h, 30) for h in (5, 6, 7)]


def test_next_slot_is_strictly_after_even_inside_the_repeated_hour():
    rule = CronRule("30 2 * * *", "Europe/Berlin")

    # 01:10Z is 02:10 CET, the second copy of the hour; its 02:30 (00:30Z) already passed.
    assert next_slot(rule, after=utc(2026, 10, 25, 1, 10)) == utc(2026, 10, 26, 1, 30)
    assert next_slot(rule, after=utc(2026, 10, 25, 0, 30)) == utc(2026, 10, 26, 1, 30)


def test_interval_slots_are_elapsed_time_from_an_anchor():
    rule = IntervalRule(90)
    anchor = utc(2026, 3, 29, 0, 59)

    assert first_slot(rule, now=datetime(2026, 3, 29, 0, 59, 0, 700, tzinfo=UTC)) == utc(
        2026, 3, 29, 1, 0, 30
    )
    assert next_slot(rule, after=anchor, anchor=anchor) == anchor + timedelta(seconds=90)
    assert next_slot(rule, after=anchor + timedelta(seconds=100), anchor=anchor) == anchor + (
        timedelta(seconds=180)
    )


def test_nothing_is_due_before_the_next_run():
    rule = CronRule("*/5 * * * *")

    decision = plan_firing(
        rule, next_run_at=utc(2026, 1, 1, 0, 5), now=utc(2026, 1, 1, 0, 4), policy=SKIP, grace=GRACE
    )

    assert decision.submit == () and decision.next_run_at == utc(2026, 1, 1, 0, 5)


def test_every_on_time_slot_is_submitted_once():
    rule = IntervalRule(10)
    start = utc(2026, 1, 1, 12)

    decision = plan_firing(
        rule, next_run_at=start, now=start + timedelta(seconds=35), policy=SKIP, grace=GRACE
    )

    assert decision.submit == tuple(start + timedelta(seconds=s) for s in (0, 10, 20, 30))
    assert decision.next_run_at == start + timedelta(seconds=40)
    assert decision.missed_from is None


def test_skip_submits_nothing_for_missed_slots_and_jumps_to_the_next_future_slot():
    rule = CronRule("0 * * * *")

    decision = plan_firing(
        rule,
        next_run_at=utc(2026, 1, 1, 1),
        now=utc(2026, 1, 1, 5, 30),
        policy=SKIP,
        grace=GRACE,
    )

    assert decision.submit == ()
    assert decision.next_run_at == utc(2026, 1, 1, 6)
    assert (decision.missed_from, decision.missed_until) == (utc(2026, 1, 1, 1), utc(2026, 1, 1, 5))


def test_catch_up_once_submits_the_latest_missed_slot_only():
    rule = CronRule("0 * * * *")

    decision = plan_firing(
        rule,
        next_run_at=utc(2026, 1, 1, 1),
        now=utc(2026, 1, 1, 5, 30),
        policy=CATCH_UP_ONCE,
        grace=GRACE,
    )

    assert decision.submit == (utc(2026, 1, 1, 5),)
    assert decision.next_run_at == utc(2026, 1, 1, 6)


def test_catch_up_once_then_the_on_time_slot():
    rule = IntervalRule(60)
    start = utc(2026, 1, 1, 12)

    decision = plan_firing(
        rule,
        next_run_at=start,
        now=start + timedelta(minutes=10, seconds=20),  # slot 12:10 is 20 s late: on time
        policy=CATCH_UP_ONCE,
        grace=GRACE,
    )

    assert decision.submit == (start + timedelta(minutes=9), start + timedelta(minutes=10))
    assert decision.next_run_at == start + timedelta(minutes=11)


def test_a_slot_exactly_grace_late_is_on_time():
    rule = IntervalRule(3600)
    slot = utc(2026, 1, 1, 12)

    decision = plan_firing(rule, next_run_at=slot, now=slot + GRACE, policy=SKIP, grace=GRACE)

    assert decision.submit == (slot,)


def test_downtime_across_spring_forward_catches_up_the_shifted_slot():
    rule = CronRule("30 2 * * *", "Europe/Berlin")

    decision = plan_firing(
        rule,
        next_run_at=utc(2026, 3, 28, 1, 30),
        now=utc(2026, 3, 29, 9),
        policy=CATCH_UP_ONCE,
        grace=GRACE,
    )

    assert decision.submit == (utc(2026, 3, 29, 1, 0),)
    assert decision.next_run_at == utc(2026, 3, 30, 0, 30)


def test_the_latest_missed_slot_inside_the_repeated_hour_is_exact():
    rule = CronRule("30 2 * * *", "Europe/Berlin")

    # now = 01:20Z + grace: 02:20 CET (second copy), after the first 02:30 CEST at 00:30Z.
    decision = plan_firing(
        rule,
        next_run_at=utc(2026, 10, 24, 0, 30),
        now=utc(2026, 10, 25, 1, 20) + GRACE,
        policy=CATCH_UP_ONCE,
        grace=GRACE,
    )

    assert decision.submit == (utc(2026, 10, 25, 0, 30),)
    assert decision.next_run_at == utc(2026, 10, 26, 1, 30)


@pytest.mark.parametrize(
    ("expression", "time_zone", "reason"),
    [
        ("", "UTC", "non-empty"),
        ("* * * *", "UTC", "5 fields"),
        ("0 0 * * * *", "UTC", "5 fields"),
        ("61 * * * *", "UTC", "invalid"),
        ("0 0 31 2 *", "UTC", "invalid"),
        ("0 0 * * *", "Mars/Olympus", "IANA"),
        ("0 0 * * *", "../etc/passwd", "IANA"),
    ],
)
def test_bad_cron_rules_are_refused(expression, time_zone, reason):
    with pytest.raises(InvalidRule, match=reason):
        CronRule(expression, time_zone)


@pytest.mark.parametrize("seconds", [0, -1, 366 * 86400 + 1, 1.5, True, "60"])
def test_bad_intervals_are_refused(seconds):
    with pytest.raises(InvalidRule, match="intervalSeconds"):
        IntervalRule(seconds)


@pytest.mark.parametrize(
    ("rule", "seconds"),
    [
        (IntervalRule(45), 45),
        (CronRule("* * * * *"), 60),
        (CronRule("*/5 * * * *"), 300),
        (CronRule("0,1 3 * * *", "Europe/Berlin"), 60),  # a burst once a day
        (CronRule("0-59 3 1 1 *"), 60),  # a burst once a year, months away
        (CronRule("0 3 * * *"), 86400),
        (CronRule("0 0 29 2 *"), 4 * 365.25 * 86400),  # leap days only
    ],
)
def test_the_closest_slots_of_a_rule(rule, seconds):
    assert closest_slots_seconds(rule, after=utc(2026, 3, 1)) == seconds


def test_slot_keys_are_per_schedule_and_slot():
    slot = utc(2026, 3, 29, 1)

    assert slot_key("abc", slot) == "schedule:abc:2026-03-29T01:00:00Z"
    assert slot_key("abc", slot.astimezone(CronRule("0 0 * * *", "Europe/Berlin").zone)) == (
        slot_key("abc", slot)
    )


def test_the_slot_module_imports_no_django():
    code = "import sys, jobweaver.schedules.slots; sys.exit('django' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
