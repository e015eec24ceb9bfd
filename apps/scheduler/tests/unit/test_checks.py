"""jobweaver.E004: a JOBWEAVER_* setting out of its range is one clear line at start-up."""

from __future__ import annotations

import pytest

from jobweaver.scheduler.checks import check_ranges


def messages() -> list[str]:
    return [error.msg for error in check_ranges() if error.id == "jobweaver.E004"]


def test_the_defaults_are_in_range():
    assert messages() == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("JOBWEAVER_SUBMIT_THROTTLE_RATE", 0),
        ("JOBWEAVER_SUBMIT_THROTTLE_WINDOW_SECONDS", 0),
        ("JOBWEAVER_SUBMIT_THROTTLE_BURST", 0),
        ("JOBWEAVER_SUBMIT_THROTTLE_BURST", "lots"),
        ("JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS", 0),
        ("JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS", 366 * 86400 + 1),
        ("JOBWEAVER_MAX_SCHEDULES_PER_USER", -1),
    ],
)
def test_a_setting_out_of_its_range_is_an_error(settings, name, value):
    setattr(settings, name, value)

    assert [message for message in messages() if message.startswith(name)], messages()
