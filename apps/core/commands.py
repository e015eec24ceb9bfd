"""The base of our management commands: one set of exit codes and one error line for all.

Exit codes (ARCHITECTURE §9):
  0  done;
  1  the job failed or its state does not allow the action (InvalidStateTransition, Forbidden,
     QuotaExceeded, a job that
     ended FAILED or CANCELLED under --wait, a wait that timed out, violations found);
  2  bad input (InvalidRequest, PayloadTooLarge, JobNotFound, WorkflowNotFound,
     IdempotencyConflict, argparse usage errors): nothing was changed.

A command that waited out JOBWEAVER_DB_LOCK_TIMEOUT_SECONDS for a database lock held by
concurrent work (the API answers the same with a retryable 429) changed nothing either: its
transaction rolled back. It exits 1 with a line that says so, not with a traceback; so does a
command whose statement the database cancelled (over JOBWEAVER_DB_STATEMENT_TIMEOUT_SECONDS).

An error is ONE line on stderr, `<command>: error: <reason>`. Run from the command line
(`manage.py`, through `run_from_argv`) the command ends with `sys.exit(code)`; called from code
(`call_command`) it raises `CommandError(reason, returncode=code)` and prints nothing, so the
caller decides what to show.
"""

from __future__ import annotations

import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError

from jobweaver.conf import settings
from jobweaver.core.db import lock_timed_out, statement_cancelled
from jobweaver.core.errors import (
    Forbidden,
    IdempotencyConflict,
    InvalidRequest,
    InvalidStateTransition,
    JobNotFound,
    JobWeaverError,
    PayloadTooLarge,
    QuotaExceeded,
    WorkflowNotFound,
)

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2

# Domain errors a command reports as its outcome; any other error is a bug and propagates.
EXIT_CODES: tuple[tuple[type[JobWeaverError], int], ...] = (
    (InvalidStateTransition, EXIT_FAILED),
    (Forbidden, EXIT_FAILED),
    (QuotaExceeded, EXIT_FAILED),
    (InvalidRequest, EXIT_BAD_INPUT),
    (PayloadTooLarge, EXIT_BAD_INPUT),
    (JobNotFound, EXIT_BAD_INPUT),
    (WorkflowNotFound, EXIT_BAD_INPUT),
    (IdempotencyConflict, EXIT_BAD_INPUT),
)


class CommandExit(Exception):
    """End the command with `returncode`. With a `message`, print `<command>: error: <message>`;
    without one the command has already said why (e.g. a summary line of its own)."""

    def __init__(self, message: str | None = None, *, returncode: int = EXIT_BAD_INPUT):
        super().__init__(message or f"exit status {returncode}")
        self.message = message
        self.returncode = returncode


def exit_code_for(error: JobWeaverError) -> int | None:
    """The exit code that reports `error`, or None when it is not a command outcome."""
    for error_class, code in EXIT_CODES:
        if isinstance(error, error_class):
            return code
    return None


class JobWeaverCommand(BaseCommand):
    """Subclass this instead of BaseCommand; raise CommandExit or a domain error to end early."""

    @property
    def command_name(self) -> str:
        return type(self).__module__.rsplit(".", 1)[-1]

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        # argparse prints the whole usage and a second line; ours is one line, exit 2, like
        # every other bad input.
        parser.error = self._usage_error
        return parser

    def _usage_error(self, message: str):
        self._end(f"{message} (see --help)", EXIT_BAD_INPUT)

    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except CommandExit as exc:
            self._end(exc.message, exc.returncode)
        except JobWeaverError as exc:
            code = exit_code_for(exc)
            if code is None:
                raise
            self._end(exc.message, code)
        except OperationalError as exc:
            if lock_timed_out(exc):
                self._end(
                    "busy: waited too long for a database lock held by concurrent work; "
                    "nothing was changed, try again",
                    EXIT_FAILED,
                )
            if statement_cancelled(exc):
                self._end(
                    "the database cancelled a statement that ran longer than "
                    f"{settings.JOBWEAVER_DB_STATEMENT_TIMEOUT_SECONDS:g} s "
                    "(JOBWEAVER_DB_STATEMENT_TIMEOUT_SECONDS) or was cancelled by an operator; "
                    "its transaction was rolled back",
                    EXIT_FAILED,
                )
            raise

    def _end(self, message: str | None, code: int):
        one_line = " ".join(message.splitlines()) if message else None
        if self._called_from_command_line:
            if one_line:
                self.stderr.write(f"{self.command_name}: error: {one_line}")
            sys.exit(code)
        raise CommandError(one_line or f"exit status {code}", returncode=code)


def user_named(username: str | None):
    """The active user a command runs as (`--user`/`--as`), or None: the command line's own,
    trusted authority. An unknown or inactive name is bad input (exit 2)."""
    if username is None:
        return None
    user_model = get_user_model()
    try:
        user = user_model._default_manager.get_by_natural_key(username)
    except user_model.DoesNotExist:
        raise CommandExit(f"unknown user {username!r}") from None
    if not user.is_active:
        raise CommandExit(f"user {username!r} is inactive")
    return user
