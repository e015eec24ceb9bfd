"""OpenTelemetry (optional): a job keeps the traceparent of the request that submitted it, and
every attempt's span — a retry included — is its child, so one trace survives retries."""

from __future__ import annotations

import uuid

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobweaver.core import tracing
from jobweaver.executor.runner import attempt_execute
from jobweaver.jobs.models import Job
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.tests.factories import live_executor, make_due, submitted_job

pytestmark = pytest.mark.django_db(transaction=True)

_exporter = InMemorySpanExporter()


@pytest.fixture(scope="module")
def spans():
    """An SDK provider recording in memory (the global provider can be set once per process;
    nothing else in the test session creates spans)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(provider)
    return _exporter


def run_once(job_id) -> str | None:
    sent: list = []
    assert dispatch_due_jobs(job_ids=[job_id], publish=sent.extend) == [job_id]
    return attempt_execute(job_id=job_id, event_id=uuid.UUID(sent[0].event_id))


def test_every_attempt_of_a_job_is_a_child_of_its_submit_in_one_trace(spans):
    spans.clear()
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("POST /api/jobs") as request:
        job = submitted_job([{"action": "FLAKY", "failTimes": 1, "message": "first try fails"}])
    trace_id = request.get_span_context().trace_id
    stored = Job.objects.get(id=job.id).traceparent
    assert stored.startswith(f"00-{trace_id:032x}-{request.get_span_context().span_id:016x}-")

    live_executor()
    assert run_once(job.id) == "FAILURE"
    make_due(job.id)  # skip the backoff
    assert run_once(job.id) == "SUCCESS"

    attempts = [s for s in spans.get_finished_spans() if s.name == "jobweaver.attempt"]
    assert [s.attributes["jobweaver.attempt"] for s in attempts] == [1, 2]
    assert [s.attributes["jobweaver.outcome"] for s in attempts] == ["FAILURE", "SUCCESS"]
    for span in attempts:
        assert span.context.trace_id == trace_id  # the same trace, across the retry
        assert span.parent.span_id == request.get_span_context().span_id


def test_without_a_current_span_a_job_has_no_traceparent_and_tracing_stays_off(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    assert tracing.enabled() is False
    assert tracing.configure("web") is False
    job = submitted_job()
    assert Job.objects.get(id=job.id).traceparent == ""
