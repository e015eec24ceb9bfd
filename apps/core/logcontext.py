"""Who, for which job and trace, wrote a log line: context for every log line of every process.

The web, the scheduler worker and the executors bind the job they work on with `log_context`
(trace id, job id, attempt); `ContextFilter`, on the console handler (settings.LOGGING), copies
that context and the process's service name onto every record, so a job's trace id can be
followed from the request that submitted it, through its dispatch, to each attempt. Context
lives in a ContextVar: each thread of an executor (and each request of the web) has its own.

`JOBWEAVER_LOG_FORMAT=json` makes `JsonFormatter` write one JSON object per line (for Loki,
Elasticsearch, Cloud Logging …); the default is a plain line with the same fields.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime

FIELDS = ("trace_id", "job_id", "attempt")
# What a record shows when a field is not bound: easy to grep, never mistaken for an id.
UNSET = "-"
PLAIN_FORMAT = (
    "%(asctime)s %(levelname)s %(name)s "
    "[%(service)s trace=%(trace_id)s job=%(job_id)s attempt=%(attempt)s] %(message)s"
)

# An incoming X-Trace-Id is bound only when it is an id (no log injection through a header).
TRACE_ID_PATTERN = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")

_context: ContextVar[dict[str, str]] = ContextVar("jobweaver_log_context", default={})  # noqa: B039 - never mutated, only replaced


def service_name() -> str:
    """The process's role (set by jobweaver_site.workers before Django starts), else web."""
    return os.environ.get("JOBWEAVER_WORKER_ROLE") or "web"


@contextmanager
def log_context(**fields: object) -> Iterator[None]:
    """Bind fields (trace_id, job_id, attempt; None leaves a field as it is) to every log line
    written inside the block, in this thread or task only."""
    bound = {name: str(value) for name, value in fields.items() if value is not None}
    token = _context.set({**_context.get(), **bound})
    try:
        yield
    finally:
        _context.reset(token)


class TraceContextMiddleware:
    """Django middleware: a request's log lines carry its valid X-Trace-Id (the job service
    binds the trace id it chose when the request had none)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        trace_id = request.headers.get("X-Trace-Id")
        if trace_id is not None and not TRACE_ID_PATTERN.match(trace_id):
            trace_id = None
        with log_context(trace_id=trace_id):
            return self.get_response(request)


class ContextFilter(logging.Filter):
    """Adds `service`, `trace_id`, `job_id` and `attempt` to every record (never drops one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _context.get()
        record.service = service_name()
        for name in FIELDS:
            # A value passed with `extra=` wins over the bound context.
            if getattr(record, name, None) is None:
                setattr(record, name, context.get(name, UNSET))
        return True


# Line breaks a message may carry from user text (a LOG step, a FAIL message, an exception's
# text), written escaped: one record is one line, so nobody can forge another (§17).
_LINE_BREAKS = str.maketrans(
    {"\r": "\\r", "\n": "\\n", "\x85": "\\x85", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def one_line(text: str) -> str:
    return text.translate(_LINE_BREAKS)


class PlainFormatter(logging.Formatter):
    """A plain line with the context fields (the default). The message is kept to one line;
    a traceback, the server's own, follows on lines of its own as usual."""

    def __init__(self) -> None:
        super().__init__(PLAIN_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = one_line(record.message)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line with the context fields (camelCase, as in the API)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "service": getattr(record, "service", service_name()),
            "traceId": _or_none(getattr(record, "trace_id", UNSET)),
            "jobId": _or_none(getattr(record, "job_id", UNSET)),
            "attempt": _or_none(getattr(record, "attempt", UNSET)),
            "process": record.process,
            "thread": record.threadName,
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def _or_none(value: object) -> object:
    return None if value == UNSET else value
