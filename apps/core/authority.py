"""On whose authority code runs (ARCHITECTURE §17).

Code that calls the Tasks API (`enqueue`, `get_result`) runs with the server's authority: it
is the project's own code. Where JobWeaver serves a request it binds the request's user here
for the request's duration (`acting_as`), and reads made through the Tasks API are scoped to
what that user may see. A contextvar, so threads and asyncio tasks each see their own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_bound_user: ContextVar = ContextVar("jobweaver_bound_user", default=None)


def bound_user():
    """The user bound by the request being served, or None: the server's authority."""
    return _bound_user.get()


@contextlib.contextmanager
def acting_as(user) -> Iterator[None]:
    token = _bound_user.set(user)
    try:
        yield
    finally:
        _bound_user.reset(token)
