"""This machine's host name, asked for once per process."""

from __future__ import annotations

import functools
import socket


@functools.cache
def host_name() -> str:
    # socket.gethostname() is a system call that lets go of the interpreter's lock; the hot
    # paths named their process with it for every job and every message, on threads that then
    # waited to take the lock back. A fork keeps the name, so one answer serves its children.
    return socket.gethostname()
