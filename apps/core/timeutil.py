from datetime import UTC, datetime


def iso(value: datetime | None) -> str | None:
    """ISO-8601 UTC with milliseconds: the format of every time in events and the API."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
