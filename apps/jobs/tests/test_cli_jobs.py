"""`manage.py jobs list|show|retry|cancel` in-process, as a shell runs it: output, --json, and
exit codes 0 (done), 1 (a job's state did not allow it), 2 (bad input, nothing changed)."""

from __future__ import annotations

import io
import json
import uuid

import pytest

from jobweaver.dashboard.tests.helpers import dead_letter, execution_of, submitted_job
from jobweaver.jobs.management.commands.jobs import Command
from jobweaver.jobs.management.commands.submit_job import Command as SubmitCommand
from jobweaver.jobs.management.commands.submit_job import _progress_bar
from jobweaver.jobs.selectors import job_detail
from jobweaver.jobs.services import job_cancel
from jobweaver.scheduler.tests.factories import finished

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(run_command):
    return lambda *args: run_command(Command, "jobs", *args)


def test_help_runs(jobs):
    for args in (("--help",), ("list", "--help"), ("retry", "--help")):
        result = jobs(*args)
        assert result.code == 0, args


def test_list_filters_by_status_and_type(jobs):
    failed, pending = dead_letter("kaput"), submitted_job()

    result = jobs("list", "--status", "FAILED", "--type", "SIMULATION")

    assert result.code == 0
    assert str(failed.id) in result.out and "kaput" in result.out
    assert str(pending.id) not in result.out
    as_json = json.loads(jobs("list", "--status", "PENDING", "--json").out)
    assert str(pending.id) in {row["jobId"] for row in as_json}
    assert {row["status"] for row in as_json} == {"PENDING"}


def test_show_prints_the_detail_and_attempts(jobs):
    job = dead_letter("kaput")

    text = jobs("show", str(job.id))
    detail = json.loads(jobs("show", str(job.id), "--json").out)

    assert text.code == 0
    assert f"job {job.id} (SIMULATION) FAILED" in text.out and "#1 FAILURE" in text.out
    assert detail["jobId"] == str(job.id) and detail["attempts"][0]["outcome"] == "FAILURE"


def test_retry_ids_reports_done_and_skipped_and_exits_1(jobs):
    failed, pending = dead_letter(), submitted_job()

    result = jobs("retry", str(failed.id), str(pending.id), "--json")

    assert result.code == 1
    report = json.loads(result.out)
    assert report["done"] == [str(failed.id)]
    assert report["skipped"] == [
        {
            "jobId": str(pending.id),
            "reason": "job is PENDING; only FAILED or CANCELLED jobs can be retried",
        }
    ]
    assert execution_of(failed.id).status == "PENDING"


def test_retry_all_failed(jobs):
    failed = [dead_letter() for _ in range(3)]

    result = jobs("retry", "--all-failed")

    assert result.code == 0, result.err
    assert "Retry: 3 retried" in result.out
    assert all(execution_of(job.id).status == "PENDING" for job in failed)


def test_cancel_ids(jobs):
    waiting, cancelled = submitted_job(), submitted_job()
    job_cancel(job_id=cancelled.id)

    result = jobs("cancel", str(waiting.id), str(cancelled.id))

    assert result.code == 1
    assert f"job {waiting.id} cancelled" in result.out
    assert f"job {cancelled.id} skipped: job is CANCELLED; it cannot be cancelled" in result.out
    assert "Cancel: 1 cancelled, 1 skipped" in result.out
    assert execution_of(waiting.id).status == "CANCELLED"


@pytest.mark.parametrize(
    "args",
    [
        ("retry",),  # neither ids nor --all-failed
        ("retry", "--all-failed", str(uuid.uuid4())),
        ("cancel", "not-a-uuid"),
        ("list", "--status", "NOPE"),
        ("list", "--limit", "0"),
        ("show",),
        ("frobnicate",),
    ],
)
def test_bad_input_exits_2_with_one_line(jobs, args):
    result = jobs(*args)

    assert result.code == 2, result
    assert result.err.startswith("jobs: error: ") and result.err.count("\n") == 1


def test_an_unknown_id_changes_nothing_and_exits_2(jobs):
    waiting = submitted_job()

    result = jobs("cancel", str(waiting.id), str(uuid.uuid4()))

    assert result.code == 2
    assert "no such job" in result.err
    assert execution_of(waiting.id).status == "PENDING"


def test_progress_bar_fills_with_the_steps_done():
    detail = {
        "status": "RUNNING",
        "progress": {"stepsCompleted": 1, "totalSteps": 4},
        "retryCount": 0,
        "maxRetryCount": 3,
        "lastError": None,
    }

    bar = _progress_bar(detail)

    assert bar.startswith("[" + "#" * 8 + "." * 22 + "]")
    assert "25%" in bar and "RUNNING 1/4" in bar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_submit_job_wait_redraws_one_bar_on_a_terminal_and_plain_lines_otherwise():
    job = submitted_job(steps=[{"action": "LOG", "message": "a"}])
    finished(job.id)
    detail = job_detail(job_id=job.id)

    on_terminal = SubmitCommand(stdout=Terminal(), stderr=io.StringIO())
    on_terminal._follow(detail, timeout=5, quiet_stdout=False)
    piped = SubmitCommand(stdout=io.StringIO(), stderr=io.StringIO())
    piped._follow(detail, timeout=5, quiet_stdout=False)

    drawn = on_terminal.stdout._out.getvalue()
    assert drawn.startswith("\r[" + "#" * 30 + "] 100% COMPLETED 1/1") and drawn.endswith("\n")
    assert piped.stdout._out.getvalue() == "COMPLETED 1/1\n"
