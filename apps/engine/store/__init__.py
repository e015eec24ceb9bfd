"""The engine's store: every SQL statement the engine runs, named, with a line saying what it
does (procrastinate's named queries, River's driver). SQL text never leaves this package: the
rest of the engine calls these functions with typed values and gets values back.

`STATEMENTS` lists them (name -> description) for readers and for the test that holds every
statement function to a description. Modules: `executions` (an execution's row: lock, save,
insert, the fenced and set-based moves, leases), `attempts` (the attempt ledger's rows),
`events` (outbox rows of domain events), `claim` (the dispatcher's claim and its rules),
`keys` (concurrency keys per owner or shared: their lock, the limits that decide, the re-key)
and `workflows` (a workflow's counts and the locks that keep them exact, §16).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)

STATEMENTS: dict[str, str] = {}


def named(description: str) -> Callable[[F], F]:
    """Register the decorated statement function under its own name, with `description`."""

    def register(function: F) -> F:
        if function.__name__ in STATEMENTS:
            raise ValueError(f"statement {function.__name__} is named twice")
        STATEMENTS[function.__name__] = description
        return function

    return register
