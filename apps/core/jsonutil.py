"""The one strict JSON decoder for what users send us (the API's request body, `submit_job`'s
--file and --payload), so both accept and refuse exactly the same documents.

Strict means: no duplicate keys (Python would silently keep the last one), no NaN or Infinity
(not JSON, and no step field could use them), UTF-8 only. Every refusal is an `InvalidRequest`
with a one-line message `<source> is not valid JSON: <reason>`.
"""

from __future__ import annotations

import json
from typing import Any

from apps.core.errors import InvalidRequest


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    result = dict(pairs)
    if len(result) != len(pairs):
        keys = [key for key, _ in pairs]
        duplicates = sorted({key for key in keys if keys.count(key) > 1})
        raise ValueError(f"duplicate keys: {', '.join(duplicates)}")
    return result


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def loads_strict(document: str | bytes, *, source: str) -> Any:
    """Decode `document`, or raise InvalidRequest naming `source` (e.g. "request body")."""
    if isinstance(document, bytes):
        try:
            document = document.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequest(f"{source} is not valid JSON: it is not UTF-8 text") from None
    try:
        return json.loads(
            document, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constants
        )
    except RecursionError:
        raise InvalidRequest(f"{source} is not valid JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError is a ValueError, as are the hooks' refusals
        reason = " ".join(str(exc).split())
        raise InvalidRequest(f"{source} is not valid JSON: {reason}") from None
