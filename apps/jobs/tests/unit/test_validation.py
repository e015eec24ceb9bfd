"""Strict validation of job requests (apps/jobs/validation.py, ARCHITECTURE §7-§8), without a
database: every step type's bounds and types, unknown and missing fields, the request's own
fields and runAt parsing. Each refusal names the offending field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from jobweaver.core.errors import InvalidRequest
from jobweaver.jobs.kinds.simulation import validate_steps
from jobweaver.jobs.validation import parse_job_request


def request(*steps, **fields) -> dict:
    return {"jobType": "SIMULATION", "payload": {"steps": list(steps)}, **fields}


def refused(body) -> str:
    with pytest.raises(InvalidRequest) as raised:
        parse_job_request(body)
    return raised.value.message


def one_step(step: dict) -> dict:
    (normalized,) = validate_steps({"steps": [step]})
    return normalized


# --- each step type: its fields at and beyond their bounds ---------------------------------

ACCEPTED_STEPS = [
    pytest.param({"action": "SLEEP", "durationMs": 0}, id="sleep-0"),
    pytest.param({"action": "SLEEP", "durationMs": 600_000}, id="sleep-max"),
    pytest.param({"action": "LOG", "message": ""}, id="log-empty"),
    pytest.param({"action": "LOG", "message": "é" * 1000}, id="log-1000-chars"),
    pytest.param({"action": "COMPUTE", "iterations": 0}, id="compute-0"),
    pytest.param({"action": "COMPUTE", "iterations": 100_000_000}, id="compute-max"),
    pytest.param({"action": "HTTP_CALL", "url": "http://example.com", "latencyMs": 0}, id="http-0"),
    pytest.param(
        {"action": "HTTP_CALL", "url": "https://example.com:8443/a?b=c", "latencyMs": 600_000},
        id="http-max",
    ),
    pytest.param(
        {"action": "FAIL", "message": "boom", "retryable": False}, id="fail-not-retryable"
    ),
    pytest.param({"action": "FLAKY", "failTimes": 1, "message": "flaky"}, id="flaky-1"),
    pytest.param({"action": "FLAKY", "failTimes": 1000}, id="flaky-max"),
]


@pytest.mark.parametrize("step", ACCEPTED_STEPS)
def test_steps_within_their_bounds_are_accepted_unchanged(step):
    normalized = one_step(step)

    assert {name: normalized[name] for name in step} == step


REFUSED_STEPS = [
    ({"action": "SLEEP", "durationMs": -1}, "durationMs must be between 0 and 600000, got -1"),
    ({"action": "SLEEP", "durationMs": 600_001}, "durationMs must be between 0 and 600000"),
    ({"action": "SLEEP", "durationMs": "100"}, "durationMs must be an integer, got string"),
    ({"action": "SLEEP", "durationMs": 1.5}, "durationMs must be an integer, got number"),
    ({"action": "SLEEP", "durationMs": True}, "durationMs must be an integer, got boolean"),
    ({"action": "SLEEP", "durationMs": None}, "durationMs must be an integer, got null"),
    ({"action": "LOG", "message": "x" * 1001}, "message must be at most 1000 characters"),
    ({"action": "LOG", "message": 5}, "message must be a string, got integer"),
    ({"action": "COMPUTE", "iterations": -1}, "iterations must be between 0 and 100000000"),
    ({"action": "COMPUTE", "iterations": 100_000_001}, "iterations must be between 0 and"),
    ({"action": "COMPUTE", "iterations": True}, "iterations must be an integer, got boolean"),
    (
        {"action": "HTTP_CALL", "url": "ftp://example.com", "latencyMs": 1},
        "url must be an http or https URL",
    ),
    (
        {"action": "HTTP_CALL", "url": "example.com:80", "latencyMs": 1},
        "url must be an http or https URL",
    ),
    ({"action": "HTTP_CALL", "url": "https://", "latencyMs": 1}, "url must be an http or https"),
    ({"action": "HTTP_CALL", "url": "  ", "latencyMs": 1}, "url must not be empty"),
    (
        {"action": "HTTP_CALL", "url": "https://e.com/" + "a" * 2000, "latencyMs": 1},
        "url must be at most 2000 characters",
    ),
    (
        {"action": "HTTP_CALL", "url": "https://e.com", "latencyMs": 600_001},
        "latencyMs must be between 0 and 600000",
    ),
    ({"action": "FAIL", "retryable": "no"}, "retryable must be a boolean, got string"),
    ({"action": "FAIL", "retryable": 0}, "retryable must be a boolean, got integer"),
    ({"action": "FAIL", "message": None}, "message must be a string, got null"),
    ({"action": "FLAKY", "failTimes": 0}, "failTimes must be between 1 and 1000, got 0"),
    ({"action": "FLAKY", "failTimes": 1001}, "failTimes must be between 1 and 1000"),
    ({"action": "FLAKY", "failTimes": 1, "message": []}, "message must be a string, got array"),
]


@pytest.mark.parametrize(("step", "reason"), REFUSED_STEPS)
def test_steps_beyond_their_bounds_or_of_the_wrong_type_are_refused(step, reason):
    message = refused(request({"action": "LOG", "message": "first"}, step))

    assert message.startswith("payload.steps[1].")
    assert reason in message


def test_optional_step_fields_get_their_defaults():
    assert one_step({"action": "FAIL"}) == {
        "action": "FAIL",
        "message": "Simulated failure",
        "retryable": True,
    }
    assert one_step({"action": "FLAKY", "failTimes": 2}) == {
        "action": "FLAKY",
        "failTimes": 2,
        "message": "Simulated flaky failure",
    }


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        ({"action": "LOG", "message": "a", "level": "INFO"}, "has unknown field(s): level"),
        ({"action": "SLEEP", "durationMs": 1, "b": 1, "a": 2}, "has unknown field(s): a, b"),
        ({"action": "LOG"}, "is missing required field(s): message"),
        ({"action": "HTTP_CALL"}, "is missing required field(s): latencyMs, url"),
        ({"action": "EXPLODE"}, ".action must be one of SLEEP, LOG, COMPUTE, HTTP_CALL, FAIL"),
        ({"action": "sleep", "durationMs": 1}, ".action must be one of"),
        ({"durationMs": 1}, ".action must be one of"),
        ("LOG", "payload.steps[0] must be an object, got string"),
    ],
)
def test_unknown_missing_or_misshapen_step_fields_are_refused(step, reason):
    message = refused(request(step))

    assert message.startswith("payload.steps[0]")
    assert reason in message


# --- the payload and the request -----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ([], "request body must be an object, got array"),
        ({"payload": {"steps": []}}, "request body is missing required field(s): jobType"),
        ({"jobType": "SIMULATION"}, "request body is missing required field(s): payload"),
        ({**request({"action": "LOG", "message": "a"}), "owner": "bob"}, "unknown field(s)"),
        ({**request({"action": "LOG", "message": "a"}), "jobType": "SHELL"}, "jobType must be"),
        ({"jobType": "SIMULATION", "payload": []}, "payload must be an object, got array"),
        ({"jobType": "SIMULATION", "payload": {}}, "payload is missing required field(s): steps"),
        (
            {"jobType": "SIMULATION", "payload": {"steps": [], "name": "x"}},
            "payload has unknown field(s): name",
        ),
        (
            {"jobType": "SIMULATION", "payload": {"steps": {}}},
            "payload.steps must be an array, got object",
        ),
        (request(), "payload.steps must contain at least one step"),
    ],
)
def test_misshapen_requests_are_refused(body, reason):
    assert reason in refused(body)


def test_the_step_limit_is_a_setting(settings):
    settings.JOBWEAVER_MAX_STEPS = 3
    log = {"action": "LOG", "message": "x"}

    assert len(parse_job_request(request(log, log, log)).steps) == 3
    assert refused(request(log, log, log, log)) == ("payload.steps has 4 steps; at most 3 allowed")


def test_request_fields_get_their_defaults():
    spec = parse_job_request(request({"action": "LOG", "message": "a"}))

    assert (spec.job_type, spec.priority, spec.max_retries) == ("SIMULATION", 5, 3)
    assert (spec.run_at, spec.timeout_seconds) == (None, 300)


def test_null_request_fields_mean_their_defaults():
    spec = parse_job_request(
        request(
            {"action": "LOG", "message": "a"},
            priority=None,
            maxRetryCount=None,
            timeoutSeconds=None,
            runAt=None,
        )
    )

    assert (spec.priority, spec.max_retries, spec.timeout_seconds, spec.run_at) == (5, 3, 300, None)


@pytest.mark.parametrize(
    ("fields", "accepted"),
    [
        ({"priority": 0}, True),
        ({"priority": 9}, True),
        ({"priority": 10}, False),
        ({"priority": -1}, False),
        ({"priority": "5"}, False),
        ({"maxRetryCount": 0}, True),
        ({"maxRetryCount": 25}, True),
        ({"maxRetryCount": 26}, False),
        ({"maxRetryCount": -1}, False),
        ({"timeoutSeconds": 1}, True),
        ({"timeoutSeconds": 86_400}, True),
        ({"timeoutSeconds": 0}, False),
        ({"timeoutSeconds": 86_401}, False),
        ({"timeoutSeconds": 2.5}, False),
    ],
)
def test_request_fields_have_bounds(fields, accepted):
    body = request({"action": "LOG", "message": "a"}, **fields)
    (name,) = fields

    if accepted:
        parse_job_request(body)
    else:
        assert refused(body).startswith(f"{name} must be")


def test_the_fingerprint_is_stable_and_tells_requests_apart():
    def fingerprint(**fields):
        return parse_job_request(request({"action": "LOG", "message": "a"}, **fields)).fingerprint()

    assert fingerprint(priority=5) == fingerprint()  # the default and the explicit value
    assert fingerprint(priority=6) != fingerprint()
    assert fingerprint(runAt="2030-01-01T00:00:00Z") != fingerprint()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            request({"action": "LOG", "message": "a"}),
            "70044953364508b838ef5291b8d8d6c687219892b21f352e30c06bb90297563b",
        ),
        (
            request(
                {"action": "SLEEP", "durationMs": 5},
                {"action": "LOG", "message": "é"},
                priority=7,
                maxRetryCount=2,
                runAt="2030-01-01T00:00:00Z",
                queueName="bulk",
                concurrencyKey="customer-1",
                uniqueKey="u",
                uniqueScope="period",
                uniqueForSeconds=60,
            ),
            "a2576bada1a504832188a79b3557a3f2275c22098057d3dc1b65dd50b0791051",
        ),
    ],
    ids=["simulation", "every-field"],
)
def test_the_fingerprint_is_the_same_in_every_release(body, expected):
    """Jobs store it, and a request repeated with its idempotency key is compared by it: a
    fingerprint that changed between releases would turn a retry across a deploy into a
    conflict. These values are what the releases before this test computed."""
    assert parse_job_request(body).fingerprint() == expected


# --- runAt ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2030-01-01T12:00:00Z", datetime(2030, 1, 1, 12, tzinfo=UTC)),
        ("2030-01-01T12:00:00+00:00", datetime(2030, 1, 1, 12, tzinfo=UTC)),
        ("2030-01-01T12:00:00.250Z", datetime(2030, 1, 1, 12, 0, 0, 250_000, tzinfo=UTC)),
        (
            "2030-01-01T14:00:00+02:00",
            datetime(2030, 1, 1, 14, tzinfo=timezone(timedelta(hours=2))),
        ),
    ],
)
def test_run_at_is_parsed_with_its_zone(raw, expected):
    run_at = parse_job_request(request({"action": "LOG", "message": "a"}, runAt=raw)).run_at

    assert run_at == expected
    assert run_at.utcoffset() == expected.utcoffset()


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("tomorrow", "runAt is not an ISO-8601 date-time: 'tomorrow'"),
        ("2030-13-01T00:00:00Z", "runAt is not an ISO-8601 date-time"),
        ("2030-01-01T12:00:00", "runAt must carry a time zone"),
        ("2030-01-01", "runAt must carry a time zone"),
        (1767225600, "runAt must be an ISO-8601 string or null, got integer"),
    ],
)
def test_run_at_without_a_zone_or_not_a_time_is_refused(raw, reason):
    assert reason in refused(request({"action": "LOG", "message": "a"}, runAt=raw))
