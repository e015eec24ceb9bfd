"""Names given by users that the dispatcher matches: queue names and concurrency keys."""

from __future__ import annotations

import re

from jobweaver.core.errors import InvalidRequest

MAX_QUEUE_NAME_CHARS = 64
MAX_CONCURRENCY_KEY_CHARS = 255
# ARCHITECTURE §15: lowercase, so a queue has one spelling on a command line, in a metric's
# label and in the API.
QUEUE_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def checked_queue_name(value, field: str = "queueName") -> str:
    """A queue's name: 1-64 lowercase letters, digits, '_' or '-', starting with a letter or
    digit (ARCHITECTURE §15)."""
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= MAX_QUEUE_NAME_CHARS
        or not QUEUE_NAME_PATTERN.match(value)
    ):
        raise InvalidRequest(
            f"{field} must be 1-{MAX_QUEUE_NAME_CHARS} lowercase letters, digits, '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def checked_key(value, field: str = "concurrencyKey") -> str:
    """A concurrency key, or (field "pattern") a key pattern: 1-255 printable characters."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_CONCURRENCY_KEY_CHARS:
        raise InvalidRequest(
            f"{field} must be a string of 1-{MAX_CONCURRENCY_KEY_CHARS} characters"
        )
    if not value.isprintable():
        raise InvalidRequest(f"{field} must be printable text")
    return value
