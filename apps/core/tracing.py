"""OpenTelemetry, optional: on when OTEL_EXPORTER_OTLP_ENDPOINT is set (the standard variable).

Every process calls `configure(service)` at start. With the endpoint set it installs an SDK
tracer provider exporting over OTLP/HTTP (the exporter reads the standard OTEL_* variables) and
instruments Django; without it nothing is installed and the API calls below are no-ops that
cost next to nothing.

A job keeps the W3C `traceparent` of the request that submitted it (`Job.traceparent`). Each
attempt's span is started as a child of it — in whichever executor, after any number of
retries — so one trace shows the submit and every attempt of the job. (Our own `traceId`
stays the id operators search logs by; the traceparent links the same job into OTel.)
"""

from __future__ import annotations

import contextlib
import logging
import os

from opentelemetry import propagate, trace

logger = logging.getLogger(__name__)

_configured = False


def enabled() -> bool:
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def configure(service: str) -> bool:
    """Install the exporting tracer provider for this process when the endpoint is set;
    True when tracing is on. Safe to call twice."""
    global _configured
    if _configured or not enabled():
        return _configured
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = os.environ.get("OTEL_SERVICE_NAME") or f"jobweaver-{service}"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    if service == "web":
        from opentelemetry.instrumentation.django import DjangoInstrumentor

        DjangoInstrumentor().instrument()
    _configured = True
    logger.info("OpenTelemetry export on for %s", name)
    return True


def current_traceparent() -> str:
    """The W3C traceparent of the current span, or "" when there is none (tracing off)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent", "")


@contextlib.contextmanager
def span_under(traceparent: str, name: str, attributes: dict | None = None):
    """A span that is a child of `traceparent` (a job's submit), current while the block
    runs; a root span when the traceparent is empty."""
    if not traceparent and isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        # Tracing off and no trace to continue: the span would be the invalid one anyway, so
        # skip making it current, a cost paid on every job (bench/NOTES.md). A job with a
        # traceparent still carries it into the attempt's context, for tasks it enqueues.
        yield trace.INVALID_SPAN
        return
    context = propagate.extract({"traceparent": traceparent}) if traceparent else None
    tracer = trace.get_tracer("jobweaver")
    with tracer.start_as_current_span(name, context=context, attributes=attributes or {}) as span:
        yield span
