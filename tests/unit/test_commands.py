"""Our management commands from the outside, without a database: every command of our apps
answers --help, and the shared base (apps/core/commands.py) turns outcomes into exit codes and
one error line, both from the command line and through `call_command`."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from jobweaver.core.commands import EXIT_BAD_INPUT, EXIT_FAILED, CommandExit, JobWeaverCommand
from jobweaver.core.errors import (
    IdempotencyConflict,
    InvalidRequest,
    InvalidStateTransition,
    JobNotFound,
    JobWeaverError,
    PayloadTooLarge,
)
from jobweaver.jobs.management.commands.submit_job import Command as SubmitJob


def our_commands() -> list[tuple[str, str]]:
    """(app, command) for every management command under apps/*/management/commands."""
    apps_dir = Path(settings.BASE_DIR) / "apps"
    return sorted(
        (path.parents[2].name, path.stem)
        for path in apps_dir.glob("*/management/commands/*.py")
        if not path.stem.startswith("_")
    )


def run_from_shell(command, name: str, *args: str, capsys) -> tuple[int, str, str]:
    """As `manage.py <name> <args>` runs it: the exit code and what was printed."""
    try:
        command.run_from_argv(["manage.py", name, *args])
        code = 0
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_discovery_finds_the_commands_we_know_of():
    names = {name for _, name in our_commands()}

    assert {"submit_job", "cancel_job", "check_invariants", "setup_kafka"} <= names


@pytest.mark.parametrize(("app", "name"), our_commands())
def test_every_command_answers_help(app, name, capsys):
    module = importlib.import_module(f"jobweaver.{app}.management.commands.{name}")

    code, out, err = run_from_shell(module.Command(), name, "--help", capsys=capsys)

    assert (code, err) == (0, "")
    assert out.startswith(f"usage: manage.py {name}")
    assert module.Command.help.split()[0] in " ".join(out.split())  # the help text is shown


# --- the base class -------------------------------------------------------------------------


class Probe(JobWeaverCommand):
    """Ends the way --outcome says."""

    help = "a probe"
    outcomes = {
        "ok": None,
        "not-allowed": InvalidStateTransition("Job 1 is COMPLETED; it cannot be cancelled"),
        "invalid": InvalidRequest("priority must be between 0 and 9,\ngot 10"),
        "too-large": PayloadTooLarge("body exceeds 10 bytes"),
        "not-found": JobNotFound("Job 1 not found"),
        "conflict": IdempotencyConflict("Idempotency-Key was already used"),
        "failed": CommandExit("job 1 ended FAILED: boom", returncode=EXIT_FAILED),
        "silent": CommandExit(returncode=EXIT_FAILED),
        "bug": JobWeaverError("internal"),
    }

    def add_arguments(self, parser):
        parser.add_argument("--outcome", choices=sorted(self.outcomes), required=True)
        parser.add_argument("--count", type=int)

    def handle(self, *args, outcome, **options):
        if self.outcomes[outcome] is not None:
            raise self.outcomes[outcome]
        self.stdout.write("done")


# The module name stands in for the command name, as for a command file.
Probe.__module__ = "jobweaver.core.management.commands.probe"

OUTCOMES = [
    ("not-allowed", 1, "Job 1 is COMPLETED; it cannot be cancelled"),
    ("invalid", 2, "priority must be between 0 and 9, got 10"),
    ("too-large", 2, "body exceeds 10 bytes"),
    ("not-found", 2, "Job 1 not found"),
    ("conflict", 2, "Idempotency-Key was already used"),
    ("failed", 1, "job 1 ended FAILED: boom"),
]


def test_success_exits_0_quietly(capsys):
    assert run_from_shell(Probe(), "probe", "--outcome", "ok", capsys=capsys) == (0, "done\n", "")


@pytest.mark.parametrize(("outcome", "code", "reason"), OUTCOMES)
def test_from_the_shell_an_outcome_is_an_exit_code_and_one_line(capsys, outcome, code, reason):
    result = run_from_shell(Probe(), "probe", "--outcome", outcome, capsys=capsys)

    assert result == (code, "", f"probe: error: {reason}\n")


@pytest.mark.parametrize(("outcome", "code", "reason"), OUTCOMES)
def test_from_code_an_outcome_is_a_command_error_with_the_code(capsys, outcome, code, reason):
    with pytest.raises(CommandError) as raised:
        call_command(Probe(), outcome=outcome)

    assert (raised.value.returncode, str(raised.value)) == (code, reason)
    assert capsys.readouterr().err == ""  # the caller decides what to show


def test_an_exit_without_a_message_prints_nothing_more(capsys):
    assert run_from_shell(Probe(), "probe", "--outcome", "silent", capsys=capsys) == (1, "", "")
    with pytest.raises(CommandError) as raised:
        call_command(Probe(), outcome="silent")
    assert raised.value.returncode == 1


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--outcome", "nope"), "argument --outcome: invalid choice: 'nope'"),
        (("--outcome", "ok", "--count", "x"), "argument --count: invalid int value: 'x'"),
        (("--outcome", "ok", "--bogus"), "unrecognized arguments: --bogus"),
        ((), "the following arguments are required: --outcome"),
    ],
)
def test_a_usage_error_exits_2_with_one_line(capsys, args, reason):
    code, out, err = run_from_shell(Probe(), "probe", *args, capsys=capsys)

    assert (code, out) == (EXIT_BAD_INPUT, "")
    assert err.startswith(f"probe: error: {reason}")
    assert err.endswith(" (see --help)\n") and err.count("\n") == 1


def test_a_usage_error_from_code_is_a_command_error_with_code_2():
    with pytest.raises(CommandError) as raised:
        call_command(Probe(), "--outcome", "ok", "--count", "x")

    assert raised.value.returncode == EXIT_BAD_INPUT


def test_an_error_that_is_not_an_outcome_is_not_hidden():
    with pytest.raises(JobWeaverError, match="internal"):
        call_command(Probe(), outcome="bug")


# --- submit_job's bad input, end to end, before it needs a database -------------------------


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (("--payload", '{"steps": []}', "--sleep", "5"), "not both"),
        (("--file", "a.json", "--payload", "{}"), "not allowed with argument --file"),
        (("--log", "a", "--wait-timeout", "5"), "--wait-timeout needs --wait"),
        (("--log", "a", "--http", "https://example.com"), "--http expects URL:MS"),
    ],
)
def test_submit_job_refuses_conflicting_input_with_exit_2(capsys, args, reason):
    code, out, err = run_from_shell(SubmitJob(), "submit_job", *args, capsys=capsys)

    assert (code, out) == (2, "")
    assert err.startswith("submit_job: error: ") and err.count("\n") == 1
    assert reason in err
