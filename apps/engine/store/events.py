"""Outbox rows of domain events (apps/engine/events.py defines them; the relay publishes them)."""

from __future__ import annotations

import functools
import json

from django.db import connection

from jobweaver.core.db import default_literal, insert_row
from jobweaver.engine.events import Event, Kind
from jobweaver.engine.store import named
from jobweaver.outbox.models import OutboxEvent


@named("INSERT one event row (through the model's field list, no ORM compile)")
def event_insert(*, topic: str, key: str, payload: dict, trace_id: str = "") -> OutboxEvent:
    event = OutboxEvent(topic=topic, key=key, payload=payload, trace_id=trace_id)
    insert_row(event)  # on every failing transition's path: no SQL compile (apps/core/db.py)
    return event


@named("INSERT … SELECT many events of one topic from one JSON document of them")
def events_insert_many(*, topic: str, rows: list[tuple[str, dict, str]]) -> int:
    """(key, payload, trace id) per event: two parameters whatever the batch's size, and the
    payloads as one document, not arrays whose quotes are escaped one by one."""
    if not rows:
        return 0
    document = [{"k": key, "p": payload, "t": trace_id} for key, payload, trace_id in rows]
    with connection.cursor() as cursor:
        cursor.execute(
            insert_select_sql("e.k", "e.p", "e.t", _BATCH_ROWS), [topic, json.dumps(document)]
        )
        return cursor.rowcount


# The events of `events_insert_many`, one JSON document of {"k", "p", "t"} objects.
_BATCH_ROWS = "FROM jsonb_to_recordset(%s::jsonb) AS e(k text, p jsonb, t text)"

# An event's field in SQL, by its kind; `iso`'s format (UTC, milliseconds, "Z") for times.
_SQL_KINDS = {
    Kind.ID: "({})::text",
    Kind.TIME: "to_char(({}) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')",
}


def payload_sql(event: Event, sources: dict[str, str]) -> str:
    """The event's payload as a jsonb expression, each field from the SQL expression its
    source is given as: the same field list as `Event.payload`, for statements of this store."""
    if set(sources) != {field.source for field in event.fields}:
        raise TypeError(f"{event.name} needs {sorted(f.source for f in event.fields)}")
    pairs = ", ".join(
        f"'{field.key}', {_SQL_KINDS.get(field.kind, '{}').format(sources[field.source])}"
        for field in event.fields
    )
    return f"jsonb_build_object({pairs})"


@functools.lru_cache(maxsize=16)
def insert_select_sql(key: str, payload: str, trace_id: str, from_sql: str) -> str:
    """An INSERT … SELECT of events whose key, payload (jsonb) and trace id are SQL expressions
    over `from_sql`, built once per shape. Its parameters: the topic, then those of the
    expressions and `from_sql`. The id comes from the database, the time is the column's
    default (the database's clock), and the other defaults are literals of the text."""
    expressions = {
        "id": "gen_random_uuid()",
        "topic": "%s",
        "key": key,
        "payload": payload,
        "trace_id": trace_id,
    }
    qn = connection.ops.quote_name
    fields = [f for f in OutboxEvent._meta.concrete_fields if f.name != "created_at"]
    columns = ", ".join(qn(field.column) for field in fields)
    values = ", ".join(expressions.get(field.name) or default_literal(field) for field in fields)
    return f"INSERT INTO {qn(OutboxEvent._meta.db_table)} ({columns}) SELECT {values} {from_sql}"
