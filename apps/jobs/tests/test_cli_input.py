"""`manage.py submit_job` in-process: how it reads its input, what it submits, and how it refuses
bad input (exit 2, one line on stderr, nothing persisted).

The command runs through `run_from_argv`, the path `manage.py` takes, so exit codes and output
are what a user in a shell sees. No worker runs here: the submit transaction never commits (the
test's transaction is rolled back), so the fast-path dispatch never fires.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from jobweaver.jobs.management.commands.submit_job import Command
from jobweaver.jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def submit_job(run_command):
    return lambda *args: run_command(Command, "submit_job", *args)


def the_job() -> Job:
    (job,) = Job.objects.select_related("execution")
    return job


def test_help_runs_and_lists_the_step_flags(submit_job):
    result = submit_job("--help")

    assert result.code == 0
    for flag in ("--sleep MS", "--log MSG", "--http URL:MS", "--wait", "--json", "--file PATH"):
        assert flag in result.out


def test_step_flags_become_steps_in_command_line_order(submit_job):
    result = submit_job(
        "--log", "first",
        "--sleep", "5",
        "--http", "http://example.com:8080/x:250",
        "--compute", "10",
        "--fail", "oops",
        "--flaky", "2",
        "--log", "last",
    )  # fmt: skip

    assert result.code == 0, result.err
    job = the_job()
    assert job.instruction == {
        "steps": [
            {"action": "LOG", "message": "first"},
            {"action": "SLEEP", "durationMs": 5},
            {"action": "HTTP_CALL", "url": "http://example.com:8080/x", "latencyMs": 250},
            {"action": "COMPUTE", "iterations": 10},
            {"action": "FAIL", "message": "oops", "retryable": True},
            {"action": "FLAKY", "failTimes": 2, "message": "Simulated flaky failure"},
            {"action": "LOG", "message": "last"},
        ]
    }
    assert job.submitted_by is None
    line = result.out.strip()
    assert "\n" not in line
    assert str(job.id) in line and job.trace_id in line and "PENDING" in line


def test_flags_override_the_fields_of_a_file(submit_job, tmp_path):
    run_at = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    body = {
        "jobType": "SIMULATION",
        "payload": {"steps": [{"action": "LOG", "message": "from a file"}]},
        "priority": 2,
        "maxRetryCount": 4,
        "timeoutSeconds": 100,
    }
    path = tmp_path / "job.json"
    path.write_text(json.dumps(body))

    result = submit_job(
        "--file", str(path), "--priority", "7", "--max-retries", "0",
        "--run-at", run_at.isoformat(),
    )  # fmt: skip

    assert result.code == 0, result.err
    job = the_job()
    assert job.steps == [{"action": "LOG", "message": "from a file"}]
    assert (job.priority, job.max_retries, job.timeout_seconds) == (7, 0, 100)
    assert job.run_at == run_at
    assert job.execution.next_run_at == run_at


def test_file_dash_reads_standard_input(submit_job, monkeypatch):
    body = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "SLEEP", "durationMs": 1}]}}
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(body)))

    result = submit_job("--file", "-", "--timeout", "30")

    assert result.code == 0, result.err
    job = the_job()
    assert job.steps == [{"action": "SLEEP", "durationMs": 1}]
    assert job.timeout_seconds == 30


def test_payload_and_json_output(submit_job):
    payload = {"steps": [{"action": "FAIL", "message": "no retry", "retryable": False}]}

    result = submit_job("--payload", json.dumps(payload), "--json")

    assert result.code == 0, result.err
    detail = json.loads(result.out)
    job = the_job()
    assert detail["jobId"] == str(job.id)
    assert detail["traceId"] == job.trace_id
    assert detail["status"] == "PENDING"
    assert detail["payload"] == payload
    assert detail["progress"] == {"stepsCompleted": 0, "totalSteps": 1}


def test_queue_flag_routes_the_job(submit_job):
    assert submit_job("--log", "on a GPU", "--queue", "gpu").code == 0
    job = the_job()
    assert (job.queue_name, job.execution.queue_name) == ("gpu", "gpu")


def test_user_flag_submits_as_that_user(submit_job):
    user = get_user_model().objects.create_user("alice", password="x")

    result = submit_job("--log", "mine", "--user", "alice")

    assert result.code == 0, result.err
    assert the_job().submitted_by == user


def test_idempotency_key_replays_the_same_request_and_refuses_another(submit_job):
    first = submit_job("--log", "once", "--idempotency-key", "k-1")
    assert first.code == 0, first.err
    job = the_job()

    replay = submit_job("--log", "once", "--idempotency-key", "k-1")
    assert replay.code == 0, replay.err
    assert str(job.id) in replay.out and "already submitted" in replay.out

    conflict = submit_job("--log", "something else", "--idempotency-key", "k-1")
    assert conflict.code == 2
    assert conflict.err.startswith("submit_job: error: Idempotency-Key was already used")
    assert Job.objects.count() == 1


def test_wait_gives_up_after_wait_timeout(submit_job):
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()

    result = submit_job("--log", "later", "--run-at", later, "--wait", "--wait-timeout", "0.3")

    assert result.code == 1
    assert result.err.splitlines() == [
        f"submit_job: error: gave up waiting after 0.3 s; job {the_job().id} is PENDING"
    ]


def test_a_file_over_the_request_limit_is_refused(submit_job, tmp_path, settings):
    settings.JOBWEAVER_MAX_REQUEST_BYTES = 100
    path = tmp_path / "big.json"
    message = "x" * 200
    steps = [{"action": "LOG", "message": message}]
    path.write_text(json.dumps({"jobType": "SIMULATION", "payload": {"steps": steps}}))

    result = submit_job("--file", str(path))

    assert result.code == 2
    assert "exceeds the request limit of 100 bytes" in result.err
    assert Job.objects.count() == 0


BAD_INPUT = [
    pytest.param([], "no job given", id="no-steps"),
    pytest.param(["--payload", "{not json"], "--payload is not valid JSON", id="payload-json"),
    pytest.param(
        ["--payload", '{"steps": [{"action": "SLEEP", "durationMs": NaN}]}'],
        "NaN is not allowed",
        id="payload-nan",
    ),
    pytest.param(
        ["--payload", '{"steps": [], "steps": [{"action": "LOG", "message": "a"}]}'],
        "duplicate keys",
        id="payload-duplicate-keys",
    ),
    pytest.param(
        ["--payload", '{"steps": [{"action": "LOG", "message": "a", "level": "INFO"}]}'],
        "payload.steps[0] has unknown field(s): level",
        id="payload-unknown-field",
    ),
    pytest.param(["--payload", "[]"], "payload must be an object", id="payload-not-object"),
    pytest.param(
        ["--log", "ok", "--sleep", "-5"],
        "--sleep -5: durationMs must be between 0 and 600000, got -5",
        id="negative-sleep",
    ),
    pytest.param(["--sleep", "soon"], "argument --sleep: invalid int value", id="sleep-not-int"),
    pytest.param(["--http", "https://example.com"], "--http expects URL:MS", id="http-no-ms"),
    pytest.param(["--http", "example.com:20"], "url must be an http or https URL", id="http-url"),
    pytest.param(["--flaky", "0"], "--flaky 0: failTimes must be between 1", id="flaky-zero"),
    pytest.param(["--log", "x" * 1001], "message must be at most 1000", id="log-too-long"),
    pytest.param(["--file", "/nonexistent/job.json"], "cannot read", id="file-missing"),
    pytest.param(
        ["--payload", '{"steps": [{"action": "LOG", "message": "a"}]}', "--sleep", "5"],
        "not both",
        id="payload-and-steps",
    ),
    pytest.param(["--file", "a.json", "--payload", "{}"], "not allowed with", id="file-payload"),
    pytest.param(["--log", "a", "--run-at", "tomorrow"], "--run-at: runAt is not", id="run-at"),
    pytest.param(["--log", "a", "--run-at", "2030-01-01T12:00:00"], "time zone", id="run-at-naive"),
    pytest.param(["--log", "a", "--priority", "10"], "--priority: priority must be", id="prio"),
    pytest.param(["--log", "a", "--max-retries", "-1"], "--max-retries: ", id="max-retries"),
    pytest.param(["--log", "a", "--timeout", "0"], "--timeout: timeoutSeconds", id="timeout"),
    pytest.param(["--log", "a", "--queue", "GPU.eu"], "--queue: queueName must be", id="queue"),
    pytest.param(["--log", "a", "--idempotency-key", ""], "Idempotency-Key must be", id="key"),
    pytest.param(["--log", "a", "--user", "nobody"], "unknown user 'nobody'", id="user"),
    pytest.param(["--log", "a", "--wait-timeout", "5"], "--wait-timeout needs --wait", id="wt"),
    pytest.param(
        ["--log", "a", "--wait", "--wait-timeout", "0"], "must be a positive", id="wt-zero"
    ),
    pytest.param(["--log", "a", "--bogus"], "unrecognized arguments: --bogus", id="unknown-flag"),
]


@pytest.mark.parametrize(("args", "reason"), BAD_INPUT)
def test_bad_input_exits_2_with_one_line_and_persists_nothing(submit_job, args, reason):
    before = Job.objects.count()

    result = submit_job(*args)

    assert result.code == 2
    assert result.out == ""
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("submit_job: error: ")
    assert reason in lines[0]
    assert Job.objects.count() == before


def test_a_file_that_is_not_json_is_refused(submit_job, tmp_path):
    path = tmp_path / "job.json"
    path.write_bytes(b"\xff\xfe not utf-8")
    not_utf8 = submit_job("--file", str(path))
    path.write_text("jobType: SIMULATION")
    not_json = submit_job("--file", str(path))

    assert (not_utf8.code, not_json.code) == (2, 2)
    assert not_utf8.err == f"submit_job: error: {path} is not UTF-8 text\n"
    assert not_json.err.startswith(f"submit_job: error: {path} is not valid JSON: ")
    assert Job.objects.count() == 0


def test_called_from_code_bad_input_raises_command_error_with_code_2():
    with pytest.raises(CommandError) as raised:
        call_command("submit_job", "--sleep", "-5")
    assert raised.value.returncode == 2
    assert "--sleep -5: durationMs" in str(raised.value)

    with pytest.raises(CommandError) as raised:
        call_command("submit_job", "--sleep", "soon")
    assert raised.value.returncode == 2
    assert Job.objects.count() == 0


@contextlib.contextmanager
def cap_lock_held_by_another_session(user, *, then: list[str]):
    """Another session holds `user`'s cap lock (a concurrent submission about to commit, in
    slow motion) while the test's session runs the `then` statements (SET LOCAL …: undone
    with the test's transaction) and the block."""
    import psycopg
    from django.db import connection

    from jobweaver.jobs import services

    with psycopg.connect(**connection.get_connection_params()) as other:
        other.execute(
            "SELECT pg_advisory_lock(%s, %s)", [services.ACTIVE_CAP_LOCK_NAMESPACE, user.pk]
        )
        with connection.cursor() as cursor:
            for statement in then:
                cursor.execute(statement)
        yield


def test_a_submit_that_waits_out_the_lock_timeout_says_so_and_persists_nothing(submit_job):
    """The command gives up after lock_timeout with one line and exit 1, as the API answers a
    retryable 429, not with a traceback."""
    user = get_user_model().objects.create_user("ivan", password="x")
    with cap_lock_held_by_another_session(user, then=["SET LOCAL lock_timeout = '200ms'"]):
        result = submit_job("--log", "x", "--user", "ivan")

    assert result.code == 1
    assert result.err.splitlines() == [
        "submit_job: error: busy: waited too long for a database lock held by concurrent "
        "work; nothing was changed, try again"
    ]
    assert Job.objects.count() == 0


def test_a_submit_whose_statement_the_database_cancels_says_so_and_persists_nothing(submit_job):
    """A statement over the statement timeout (here: waiting on the user's cap lock, with no
    lock timeout to end the wait first) is cancelled by PostgreSQL: the command says so in one
    line and exits 1, not with a traceback, and the rolled-back submit left no job."""
    user = get_user_model().objects.create_user("vera", password="x")
    statements = ["SET LOCAL lock_timeout = 0", "SET LOCAL statement_timeout = '200ms'"]
    with cap_lock_held_by_another_session(user, then=statements):
        result = submit_job("--log", "x", "--user", "vera")

    assert result.code == 1
    (line,) = result.err.splitlines()
    assert line.startswith(
        "submit_job: error: the database cancelled a statement that ran longer than "
    )
    assert line.endswith("its transaction was rolled back")
    assert Job.objects.count() == 0
