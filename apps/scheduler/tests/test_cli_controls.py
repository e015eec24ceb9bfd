"""`manage.py pause`, `resume`, `pauses` and `limits`, run as a shell runs them: exit codes,
output, and that bad input changes nothing."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from django.core.management import call_command
from django.db import connections

from jobweaver.scheduler.management.commands import limits, pause, pauses, resume
from jobweaver.scheduler.models import ConcurrencyLimit, ExecutionStatus, Pause
from jobweaver.scheduler.tests.factories import dispatched, execution_of, submitted_job

pytestmark = pytest.mark.django_db


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def run(monkeypatch, capsys):
    """`run(module, *args)`: the command through `run_from_argv`, as manage.py runs it."""
    # run_from_argv closes every connection at its end: here, the one of the test's transaction.
    monkeypatch.setattr(connections, "close_all", lambda: None)

    def run_command(module, *args: str) -> Run:
        name = module.__name__.rsplit(".", 1)[-1]
        try:
            module.Command().run_from_argv(["manage.py", name, *args])
            code = 0
        except SystemExit as exc:
            code = exc.code
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run_command


def one_line_error(result: Run, command: str, code: int) -> str:
    assert result.code == code, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{command}: error: "), result.err
    return lines[0]


@pytest.mark.parametrize("command", ["pause", "resume", "pauses", "limits"])
def test_every_command_has_help(command):
    with pytest.raises(SystemExit) as exit_:
        call_command(command, "--help")
    assert exit_.value.code == 0


# --- pause, resume, pauses ---------------------------------------------------------------------


def test_pause_list_and_resume_a_queue(run):
    paused = run(pause, "--queue", "emails", "--reason", "smtp down", "--by", "anna")
    again = run(pause, "--queue", "emails", "--reason", "other")
    listed = run(pauses)
    listed_json = run(pauses, "--json")

    assert paused.code == 0 and paused.err == ""
    assert "queue emails paused by anna since " in paused.out and "smtp down" in paused.out
    assert again.code == 0 and "already" in again.out and "nothing changed" in again.out
    assert Pause.objects.get().reason == "smtp down"
    assert "queue emails paused by anna" in listed.out
    (item,) = json.loads(listed_json.out)
    assert (item["scope"], item["name"], item["pausedBy"]) == ("QUEUE", "emails", "anna")

    resumed = run(resume, "--queue", "emails")
    assert (resumed.code, resumed.out.strip()) == (0, "resumed queue emails")
    assert not Pause.objects.exists()
    assert run(pauses).out.strip() == "nothing is paused"
    line = one_line_error(run(resume, "--queue", "emails"), "resume", 1)
    assert "not paused" in line


def test_pause_a_job_type_records_the_shell_user_and_recalls_unstarted_deliveries(run):
    job = submitted_job()
    dispatched(job.id)

    result = run(pause, "--job-type", "SIMULATION", "--json")

    assert result.code == 0
    body = json.loads(result.out)
    assert body["created"] is True and body["pausedBy"].startswith("cli")
    assert execution_of(job.id).status == ExecutionStatus.PENDING
    assert run(resume, "--job-type", "SIMULATION").code == 0


@pytest.mark.parametrize(
    ("command", "args"),
    [
        (pause, []),
        (pause, ["--queue", "a", "--job-type", "TASK"]),
        (pause, ["--queue", "has space"]),
        (pause, ["--queue", ""]),
        (pause, ["--job-type", "simulation"]),
        (pause, ["--queue", "q", "--reason", "r" * 201]),
        (pause, ["--queue", "q", "--colour", "red"]),
        (resume, []),
        (resume, ["--job-type", "NOPE"]),
        (pauses, ["extra"]),
    ],
)
def test_bad_pause_input_exits_2_with_one_line_and_changes_nothing(run, command, args):
    Pause.objects.create(scope="QUEUE", name="kept", paused_at="2026-01-01T00:00:00Z")
    name = command.__name__.rsplit(".", 1)[-1]
    one_line_error(run(command, *args), name, 2)
    assert list(Pause.objects.values_list("name", flat=True)) == ["kept"]


# --- limits --------------------------------------------------------------------------------------


def test_set_replace_list_and_delete_a_limit(run):
    created = run(limits, "set", "customer-*", "--max-running", "2")
    replaced = run(limits, "set", "customer-*", "--max-running", "3", "--max-per-second", "10")
    listed = run(limits, "list")
    listed_json = run(limits, "list", "--json")

    assert (created.code, created.out.strip()) == (
        0,
        "set customer-*: max running 2, max per second -, per owner",
    )
    assert (
        replaced.out.strip() == "replaced customer-*: max running 3, max per second 10, per owner"
    )
    assert listed.out.strip() == "customer-*: max running 3, max per second 10, per owner"
    (item,) = json.loads(listed_json.out)
    assert (item["pattern"], item["maxRunning"], item["maxPerSecond"], item["global"]) == (
        "customer-*",
        3,
        10,
        False,
    )

    deleted = run(limits, "delete", "customer-*")
    assert (deleted.code, deleted.out.strip()) == (0, "deleted the limit of customer-*")
    assert run(limits, "list").out.strip() == "no limits"
    line = one_line_error(run(limits, "delete", "customer-*"), "limits", 1)
    assert "no limit for pattern" in line


def test_set_json_says_whether_the_limit_is_new(run):
    first = json.loads(run(limits, "set", "k", "--max-per-second", "5", "--json").out)
    second = json.loads(run(limits, "set", "k", "--max-per-second", "6", "--json").out)
    assert (first["created"], second["created"], second["maxPerSecond"]) == (True, False, 6)


def test_set_a_global_limit_and_list_it(run):
    made = run(limits, "set", "customer-*", "--max-running", "1", "--global")
    as_json = json.loads(run(limits, "set", "k", "--max-running", "1", "--global", "--json").out)

    assert (made.code, made.out.strip()) == (
        0,
        "set customer-*: max running 1, max per second -, global",
    )
    assert as_json["global"] is True
    assert run(limits, "list").out.strip().splitlines() == [
        "customer-*: max running 1, max per second -, global",
        "k: max running 1, max per second -, global",
    ]
    # Set again without --global, a limit is per owner (a set replaces the limit whole).
    again = run(limits, "set", "k", "--max-running", "1")
    assert again.out.strip() == "replaced k: max running 1, max per second -, per owner"
    assert not ConcurrencyLimit.objects.get(pattern="k").is_global


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["frobnicate"],
        ["set"],
        ["set", "k"],  # neither bound
        ["set", "k", "--max-running", "0"],
        ["set", "k", "--max-running", "-3"],
        ["set", "k", "--max-running", "two"],
        ["set", "k", "--max-per-second", "1.5"],
        ["set", "k", "--max-per-second", "10000001"],
        ["set", "x" * 256, "--max-running", "1"],
        ["set", "tab\there", "--max-running", "1"],
        ["set", "", "--max-running", "1"],
        ["delete"],
        ["delete", ""],
        ["list", "extra"],
    ],
)
def test_bad_limit_input_exits_2_with_one_line_and_changes_nothing(run, args):
    ConcurrencyLimit.objects.create(pattern="k", max_running=1)
    one_line_error(run(limits, *args), "limits", 2)
    assert list(ConcurrencyLimit.objects.values_list("pattern", "max_running")) == [("k", 1)]
