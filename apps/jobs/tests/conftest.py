"""Fixtures for running the jobs app's management commands in-process, as a shell would."""

from dataclasses import dataclass

import pytest
from django.db import connections


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def run_command(monkeypatch, capsys):
    """`run_command(Command, "name", *args)`: run through `run_from_argv` (the path manage.py
    takes), returning the exit code and what was printed."""
    # run_from_argv closes every database connection when it ends; here that would close the
    # connection that holds the test's transaction.
    monkeypatch.setattr(connections, "close_all", lambda: None)

    def run(command_class, name: str, *args: str) -> Run:
        try:
            command_class().run_from_argv(["manage.py", name, *args])
            code = 0
        except SystemExit as exc:
            code = exc.code
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err)

    return run
