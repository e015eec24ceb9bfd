"""`manage.py submit_job` as a user runs it: a real process against the test database and the
session's Kafka topics, with real workers (fixture `stack`) running the jobs it submits."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid

import pytest

from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.models import Job
from jobweaver.scheduler.models import JobExecution
from tests.stack import ROOT, child_environment

pytestmark = [pytest.mark.integration]

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def submit_job(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "submit_job", *args],
        cwd=ROOT,
        env=child_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def job_id_from(output: str) -> uuid.UUID:
    """The id in the human line the command prints on submit (its first line)."""
    match = UUID.search(output.splitlines()[0])
    assert match, output
    return uuid.UUID(match.group())


def jobs_logging(message: str):
    return Job.objects.filter(instruction__contains={"steps": [{"message": message}]})


def test_wait_follows_a_job_to_completion(stack, live_db):
    hello = f"hi {uuid.uuid4().hex}"

    result = submit_job("--log", hello, "--sleep", "200", "--log", "bye", "--wait")

    assert result.returncode == 0, result.stdout + result.stderr
    job_id = job_id_from(result.stdout)
    assert JobExecution.objects.get(job_id=job_id).status == "COMPLETED"
    assert Job.objects.get(id=job_id).steps == [
        {"action": "LOG", "message": hello},
        {"action": "SLEEP", "durationMs": 200},
        {"action": "LOG", "message": "bye"},
    ]
    assert [a.outcome for a in ExecutionAttempt.objects.filter(job_id=job_id)] == ["SUCCESS"]
    assert result.stdout.splitlines()[-1] == "COMPLETED 3/3"
    assert jobs_logging(hello).get().id == job_id  # the lookup the bad-input test relies on


def test_wait_exits_1_when_the_job_fails(stack, live_db):
    result = submit_job("--fail", "boom", "--max-retries", "0", "--wait")

    assert result.returncode == 1, result.stdout + result.stderr
    job_id = job_id_from(result.stdout)
    execution = JobExecution.objects.get(job_id=job_id)
    assert execution.status == "FAILED"
    assert "boom" in execution.last_error
    assert result.stdout.splitlines()[-1].startswith("FAILED 0/1")
    assert f"submit_job: error: job {job_id} ended FAILED: " in result.stderr


def test_json_prints_the_job_detail(stack, live_db):
    message = f"json {uuid.uuid4().hex}"

    result = submit_job("--log", message, "--priority", "8", "--json")

    assert result.returncode == 0, result.stderr
    detail = json.loads(result.stdout)
    job = Job.objects.get(id=detail["jobId"])
    assert job.steps == [{"action": "LOG", "message": message}]
    assert detail["traceId"] == job.trace_id
    assert detail["priority"] == 8
    assert detail["payload"] == {"steps": [{"action": "LOG", "message": message}]}


def test_json_with_wait_prints_only_the_final_detail(stack, live_db):
    result = submit_job("--log", "one", "--compute", "1000", "--json", "--wait")

    assert result.returncode == 0, result.stderr
    detail = json.loads(result.stdout)  # one JSON document: progress went to stderr
    assert detail["status"] == "COMPLETED"
    assert detail["progress"] == {"stepsCompleted": 2, "totalSteps": 2}
    assert [attempt["outcome"] for attempt in detail["attempts"]] == ["SUCCESS"]
    assert JobExecution.objects.get(job_id=detail["jobId"]).status == "COMPLETED"


def test_bad_input_exits_2_with_one_line_and_creates_no_job(stack, live_db):
    message = f"never {uuid.uuid4().hex}"
    jobs_before = Job.objects.count()

    result = submit_job("--log", message, "--sleep", "-5")

    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        "submit_job: error: --sleep -5: durationMs must be between 0 and 600000, got -5"
    ]
    assert not jobs_logging(message).exists()
    assert Job.objects.count() == jobs_before
