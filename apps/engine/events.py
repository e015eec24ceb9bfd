"""The domain events of a job (ARCHITECTURE §6): one definition each.

An event is a topic and a list of fields; each field names the value it is made from and how
that value is written. The same list renders a payload in Python (`Event.payload`) and, for an
event written by the very statement that makes its transition, in SQL (the store's
`events.payload_sql`): one schema, never two spellings of it. Which transition writes which
event is a column of the transition table (apps/engine/transitions.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from jobweaver.core import kafka
from jobweaver.core.timeutil import iso


class Kind(Enum):
    """How a value is written: JSON's own types, ids as text, times as `iso` strings."""

    TEXT = "text"
    ID = "id"
    INT = "int"
    BOOL = "bool"
    TIME = "time"


@dataclass(frozen=True)
class Field:
    key: str  # the payload's key
    source: str  # the name of the value it is made from
    kind: Kind = Kind.TEXT
    # An optional field is left out of the payload when its value is None.
    optional: bool = False


def _python(kind: Kind, value):
    if value is None:
        return None
    if kind is Kind.ID:
        return str(value)
    if kind is Kind.TIME:
        return iso(value)
    return value


@dataclass(frozen=True)
class Event:
    name: str
    topic: str
    fields: tuple[Field, ...]

    def payload(self, **values) -> dict:
        """The event's JSON payload from its fields' values (every source named, none more)."""
        sources = {field.source for field in self.fields}
        if set(values) != sources:
            raise TypeError(f"{self.name} is made of {sorted(sources)}, got {sorted(values)}")
        return {
            field.key: _python(field.kind, values[field.source])
            for field in self.fields
            if not (field.optional and values[field.source] is None)
        }


JOB_CREATED = Event(
    "JobCreated",
    kafka.JOB_CREATED,
    (
        Field("jobId", "job_id", Kind.ID),
        Field("traceId", "trace_id"),
        Field("jobType", "job_type"),
        Field("priority", "priority", Kind.INT),
        Field("maxRetryCount", "max_retries", Kind.INT),
        Field("runAt", "run_at", Kind.TIME),
        Field("createdAt", "created_at", Kind.TIME),
    ),
)

JOB_COMPLETED = Event(
    "JobCompleted",
    kafka.JOB_COMPLETED,
    (
        Field("jobId", "job_id", Kind.ID),
        Field("eventId", "event_id", Kind.ID),
        Field("traceId", "trace_id"),
        Field("attempt", "attempt", Kind.INT),
        Field("completedAt", "completed_at", Kind.TIME),
    ),
)

JOB_FAILED = Event(
    "JobFailed",
    kafka.JOB_FAILED,
    (
        Field("jobId", "job_id", Kind.ID),
        Field("eventId", "event_id", Kind.ID),
        Field("traceId", "trace_id"),
        Field("attempt", "attempt", Kind.INT),
        Field("error", "error"),
        Field("retryable", "retryable", Kind.BOOL),
        Field("willRetry", "will_retry", Kind.BOOL),
        Field("failedAt", "failed_at", Kind.TIME),
        Field("nextRunAt", "next_run_at", Kind.TIME, optional=True),
    ),
)

# The seed's DeadLetterEvent (ARCHITECTURE §5).
JOB_DEAD_LETTER = Event(
    "DeadLetterEvent",
    kafka.JOB_DEAD_LETTER,
    (
        Field("jobId", "job_id", Kind.ID),
        Field("traceId", "trace_id"),
        Field("reason", "reason"),
        Field("finalRetryCount", "final_retry_count", Kind.INT),
        Field("attempts", "attempts", Kind.INT),
        Field("failedAt", "failed_at", Kind.TIME),
    ),
)

# At each finish of a workflow (§16); key = workflow id.
WORKFLOW_FINISHED = Event(
    "WorkflowFinished",
    kafka.WORKFLOW_FINISHED,
    (
        Field("workflowId", "workflow_id", Kind.ID),
        Field("name", "name"),
        Field("status", "status"),
        Field("finishedAt", "finished_at", Kind.TIME),
    ),
)
