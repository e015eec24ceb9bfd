"""A task's JobWeaver options (ARCHITECTURE §13a): their checks, and the keys a call formats.

The options live on the task object (apps/tasks/backend.py's JobWeaverTask) and are stored on
each job it enqueues; these checks run when the task is declared and whenever `with_options`
makes a copy, so a bad option fails where it is written, not when a job runs.
"""

from __future__ import annotations

import string

from jobweaver.conf import settings
from jobweaver.core.errors import InvalidRequest
from jobweaver.core.names import checked_key

MAX_RETRY_ON_CLASSES = 20
MAX_CLASS_PATH_CHARS = 255
MAX_BACKOFF_SECONDS = 86_400


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_task_options(task) -> None:
    """InvalidRequest for the first option of `task` out of its range."""
    retry_on = task.retry_on
    if retry_on is not None and not (
        0 < len(retry_on) <= MAX_RETRY_ON_CLASSES
        and all(
            isinstance(path, str) and 0 < len(path) <= MAX_CLASS_PATH_CHARS and "." in path
            for path in retry_on
        )
    ):
        raise InvalidRequest(
            f"retry_on must name 1-{MAX_RETRY_ON_CLASSES} exception classes (classes or their "
            "dotted paths)"
        )
    backoff = task.retry_backoff
    if backoff is not None and not (
        len(backoff) == 2
        and all(_number(value) for value in backoff)
        and 0 < backoff[0] <= backoff[1] <= MAX_BACKOFF_SECONDS
    ):
        raise InvalidRequest(
            f"retry_backoff must be (base, cap) seconds with 0 < base <= cap <= "
            f"{MAX_BACKOFF_SECONDS}"
        )
    jitter = task.retry_jitter
    if jitter is not None and not (_number(jitter) and 0 <= jitter <= 1):
        raise InvalidRequest("retry_jitter must be a fraction from 0 to 1")
    hard = task.hard_timeout_seconds
    if hard is not None:
        timeout = task.timeout_seconds or settings.JOBWEAVER_DEFAULT_TIMEOUT_SECONDS
        if not (
            isinstance(hard, int)
            and not isinstance(hard, bool)
            and timeout <= hard <= settings.JOBWEAVER_MAX_TIMEOUT_SECONDS
        ):
            raise InvalidRequest(
                "hard_timeout_seconds must be an integer from timeout_seconds to "
                f"{settings.JOBWEAVER_MAX_TIMEOUT_SECONDS}"
            )
    for name in ("concurrency_key", "unique_key"):
        template = getattr(task, name)
        if template is not None:
            checked_key(template, name)
            _fields(template, name)


def _fields(template: str, name: str) -> list[str]:
    """The kwargs a key template names ("customer-{customer_id}" → ["customer_id"])."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise InvalidRequest(f"{name} {template!r} is not a format string: {exc}") from None
    fields = [field for _, field, _, _ in parsed if field is not None]
    if any(not field.isidentifier() for field in fields):
        raise InvalidRequest(f"{name} {template!r} may name only keyword arguments, as {{name}}")
    return fields


def call_keys(task, kwargs: dict) -> dict:
    """The JobSpec's concurrency and unique keys of one call: each template formatted with
    the call's kwargs; InvalidRequest when a kwarg it names is missing."""
    keys: dict = {}
    for name, spec_fields in (
        ("concurrency_key", lambda key: {"concurrency_key": key}),
        ("unique_key", lambda key: {"unique_key": key, "unique_scope": "active"}),
    ):
        template = getattr(task, name, None)
        if template is None:
            continue
        missing = [field for field in _fields(template, name) if field not in kwargs]
        if missing:
            raise InvalidRequest(
                f"{name} {template!r} needs the keyword argument(s) {', '.join(missing)}"
            )
        key = template.format(**{field: kwargs[field] for field in _fields(template, name)})
        keys.update(spec_fields(checked_key(key, name)))
    return keys


POLICY_OPTIONS = ("retry_on", "retry_backoff", "retry_jitter", "hard_timeout_seconds")


def declared_policy(task) -> dict:
    """The JobSpec fields of a registered task's declared retry policy and hard timeout (those
    it sets): what every job of the task carries, from the API, a schedule or `enqueue`."""
    return {
        name: getattr(task, name)
        for name in POLICY_OPTIONS
        if getattr(task, name, None) is not None
    }
