"""`submit_job`'s command line, parsed with the command's own parser and turned into a job
request without a database: step flags keep their order, --http URL:MS, and the combinations
that are bad input (exit 2) before anything is looked up or written."""

from __future__ import annotations

import pytest
from django.core.management.base import CommandError

from jobweaver.core.commands import CommandExit, exit_code_for
from jobweaver.core.errors import JobWeaverError
from jobweaver.jobs.management.commands.submit_job import Command, _step_from_flag


def parse(*args: str) -> dict:
    parser = Command().create_parser("manage.py", "submit_job")
    return vars(parser.parse_args(args))


def spec_of(*args: str):
    return Command()._job_spec(parse(*args))


def test_step_flags_keep_their_command_line_order():
    options = parse("--log", "a", "--sleep", "5", "--log", "b", "--compute", "7", "--flaky", "2")

    assert options["steps"] == [
        ("--log", "a"),
        ("--sleep", 5),
        ("--log", "b"),
        ("--compute", 7),
        ("--flaky", 2),
    ]


def test_step_flags_become_the_steps_of_a_simulation_job():
    spec = spec_of(
        "--log", "start", "--sleep", "500", "--http", "https://example.com:200",
        "--fail", "boom", "--priority", "7", "--max-retries", "0",
    )  # fmt: skip

    assert spec.job_type == "SIMULATION"
    assert spec.steps == [
        {"action": "LOG", "message": "start"},
        {"action": "SLEEP", "durationMs": 500},
        {"action": "HTTP_CALL", "url": "https://example.com", "latencyMs": 200},
        {"action": "FAIL", "message": "boom", "retryable": True},
    ]
    assert (spec.priority, spec.max_retries) == (7, 0)


@pytest.mark.parametrize(
    ("value", "url", "latency_ms"),
    [
        ("https://example.com:250", "https://example.com", 250),
        ("https://example.com:8443/api:0", "https://example.com:8443/api", 0),
        ("http://[::1]:8080/x?a=b:75", "http://[::1]:8080/x?a=b", 75),
    ],
)
def test_http_takes_the_latency_after_the_last_colon(value, url, latency_ms):
    assert _step_from_flag("--http", value) == {
        "action": "HTTP_CALL",
        "url": url,
        "latencyMs": latency_ms,
    }


@pytest.mark.parametrize("value", ["https://example.com", "https://example.com:fast", "x:"])
def test_http_without_a_latency_is_bad_input(value):
    with pytest.raises(CommandExit) as raised:
        _step_from_flag("--http", value)

    assert raised.value.returncode == 2
    assert raised.value.message.startswith("--http expects URL:MS")


def test_a_payload_is_the_job_body_and_flags_override_its_fields():
    spec = spec_of("--payload", '{"steps": [{"action": "LOG", "message": "a"}]}', "--timeout", "9")

    assert (spec.steps, spec.timeout_seconds) == ([{"action": "LOG", "message": "a"}], 9)


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--payload", '{"steps": []}', "--sleep", "5"), "not both"),
        (("--file", "job.json", "--log", "a"), "not both"),
        ((), "no job given"),
        (("--payload", '{"steps": [], "steps": []}'), "--payload is not valid JSON: duplicate"),
        (("--sleep", "-5"), "--sleep -5: durationMs must be between 0 and 600000"),
        (("--log", "a", "--priority", "10"), "--priority: priority must be between 0 and 9"),
    ],
)
def test_conflicting_or_invalid_sources_are_bad_input(args, reason):
    with pytest.raises((CommandExit, JobWeaverError)) as raised:
        spec_of(*args)

    error = raised.value
    code = error.returncode if isinstance(error, CommandExit) else exit_code_for(error)
    assert (code, reason in error.message) == (2, True), error.message


def test_file_and_payload_together_are_a_usage_error_exit_2():
    with pytest.raises(CommandError) as raised:
        parse("--file", "job.json", "--payload", "{}")

    assert raised.value.returncode == 2
    assert "not allowed with argument" in str(raised.value)


@pytest.mark.parametrize("args", [("--sleep", "soon"), ("--bogus",), ("--wait-timeout", "x")])
def test_malformed_flags_are_usage_errors_exit_2(args):
    with pytest.raises(CommandError) as raised:
        parse("--log", "a", *args)

    assert raised.value.returncode == 2


def test_wait_timeout_without_wait_is_bad_input():
    with pytest.raises(CommandExit) as raised:
        Command()._wait_timeout(parse("--log", "a", "--wait-timeout", "5"))

    assert raised.value.returncode == 2
    assert raised.value.message == "--wait-timeout needs --wait"


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan"])
def test_wait_timeout_must_be_a_positive_finite_number(value):
    with pytest.raises(CommandExit) as raised:
        Command()._wait_timeout(parse("--log", "a", "--wait", "--wait-timeout", value))

    assert raised.value.returncode == 2


def test_wait_timeout_defaults_when_waiting():
    assert Command()._wait_timeout(parse("--log", "a", "--wait")) == 600.0
    assert Command()._wait_timeout(parse("--log", "a", "--wait", "--wait-timeout", "2.5")) == 2.5
