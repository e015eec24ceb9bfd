"""Log context: every line says which service, trace, job and attempt it belongs to."""

from __future__ import annotations

import io
import json
import logging
import sys
import threading

import pytest

from jobweaver.core.logcontext import (
    ContextFilter,
    JsonFormatter,
    PlainFormatter,
    TraceContextMiddleware,
    log_context,
)


@pytest.fixture
def captured(monkeypatch):
    """A logger writing through the console handler's filter, in JSON, into a buffer."""
    monkeypatch.setenv("JOBWEAVER_WORKER_ROLE", "executor")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("test.logcontext")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    logger.removeHandler(handler)


def test_bound_fields_reach_each_line_and_unbind_after_the_block(captured):
    logger, lines = captured
    with log_context(trace_id="t-1", job_id="j-1"):
        with log_context(attempt=2):
            logger.info("inner")
        logger.info("outer")
    logger.info("after")
    inner, outer, after = lines()
    assert inner["service"] == "executor"
    assert (inner["traceId"], inner["jobId"], inner["attempt"]) == ("t-1", "j-1", "2")
    assert (outer["traceId"], outer["attempt"]) == ("t-1", None)
    assert (after["traceId"], after["jobId"]) == (None, None)


def test_context_is_per_thread(captured):
    logger, lines = captured

    def other():
        logger.info("other thread")

    with log_context(trace_id="mine"):
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert lines()[0]["traceId"] is None


def test_extra_fields_win_and_exceptions_are_kept(captured):
    logger, lines = captured
    with log_context(trace_id="bound"):
        try:
            raise ValueError("boom")
        except ValueError:
            logger.exception("failed", extra={"trace_id": "explicit"})
    [line] = lines()
    assert line["traceId"] == "explicit"
    assert "ValueError: boom" in line["exception"]


def test_plain_lines_carry_the_same_fields():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello %s", ("you",), None)
    with log_context(trace_id="t-9", job_id="j-9", attempt=1):
        ContextFilter().filter(record)
    text = PlainFormatter().format(record)
    assert "trace=t-9 job=j-9 attempt=1] hello you" in text


def test_a_message_with_line_breaks_stays_one_line_and_a_traceback_follows_it():
    message = "step said: ok\r\n2026-01-01 00:00:00,000 ERROR forged [x] admin deleted\u2028"
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "%s", (message,), sys.exc_info())
    ContextFilter().filter(record)

    first, *rest = PlainFormatter().format(record).split("\n")

    assert first.endswith(
        "step said: ok\\r\\n2026-01-01 00:00:00,000 ERROR forged [x] admin deleted\\u2028"
    )
    assert rest[0] == "Traceback (most recent call last):" and rest[-1] == "ValueError: boom"


class FakeRequest:
    def __init__(self, headers):
        self.headers = headers


@pytest.mark.parametrize(
    ("header", "bound"), [("abc-123", "abc-123"), ("bad\nid", None), (None, None)]
)
def test_middleware_binds_a_valid_incoming_trace_id_only(header, bound):
    seen = []

    def view(request):
        record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", (), None)
        ContextFilter().filter(record)
        seen.append(record.trace_id)

    TraceContextMiddleware(view)(FakeRequest({"X-Trace-Id": header} if header else {}))
    assert seen == [bound or "-"]
