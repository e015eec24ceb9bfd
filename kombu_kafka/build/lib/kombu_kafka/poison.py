"""Poison records: values the transport cannot turn into a kombu message.

One undecodable record must not stop a partition (every later record waits behind it) nor
crash the worker (it would crash again on redelivery, forever). The channel parks it instead:
the record goes unchanged to a parked topic, with where it came from and why in its headers,
and only then does its offset count as done.
"""

from __future__ import annotations

from kombu.utils.json import loads

ORIGINAL_TOPIC = "kombu_kafka.original_topic"
ORIGINAL_PARTITION = "kombu_kafka.original_partition"
ORIGINAL_OFFSET = "kombu_kafka.original_offset"
ERROR = "kombu_kafka.error"


class PoisonRecord(ValueError):
    """A record whose value is not a kombu message."""


def decode_payload(value: bytes | None) -> dict:
    """The kombu payload in a record value; PoisonRecord when it is not one."""
    if value is None:
        raise PoisonRecord("record has no value")
    try:
        payload = loads(value)
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise PoisonRecord(f"value is not JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise PoisonRecord(f"value is a JSON {type(payload).__name__}, not an object")
    properties = payload.get("properties")
    if not isinstance(properties, dict):
        raise PoisonRecord("message has no 'properties' object")
    if not isinstance(properties.get("delivery_info", {}), dict):
        raise PoisonRecord("'properties.delivery_info' is not an object")
    if "body" not in payload:
        raise PoisonRecord("message has no 'body'")
    return payload


def parked_headers(record, error: str) -> list[tuple[str, bytes]]:
    """The record's own headers plus where it came from and why it was parked."""
    return [
        *(record.headers() or []),
        (ORIGINAL_TOPIC, record.topic().encode()),
        (ORIGINAL_PARTITION, str(record.partition()).encode()),
        (ORIGINAL_OFFSET, str(record.offset()).encode()),
        (ERROR, error.encode()),
    ]
