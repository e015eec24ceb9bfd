"""`jobweaver.E004`: the security settings of §17 are range-checked like the others."""

from __future__ import annotations

import pytest

from jobweaver.scheduler.checks import check_ranges


def errors(settings, **values) -> list[str]:
    for name, value in values.items():
        setattr(settings, name, value)
    return [error.msg for error in check_ranges() if error.id == "jobweaver.E004"]


def test_the_defaults_are_in_range(settings):
    assert errors(settings) == []


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("JOBWEAVER_METRICS_PORT", -1),
        ("JOBWEAVER_METRICS_PORT", 70_000),
        ("JOBWEAVER_METRICS_KAFKA_CACHE_SECONDS", -0.5),
        ("JOBWEAVER_METRICS_KAFKA_CACHE_SECONDS", "5"),
        ("JOBWEAVER_API_TOKEN_DEFAULT_DAYS", -1),
        ("JOBWEAVER_API_TOKEN_DEFAULT_DAYS", 3651),
    ],
)
def test_out_of_range_is_an_error(settings, name, value):
    (message,) = errors(settings, **{name: value})
    assert message.startswith(name)
