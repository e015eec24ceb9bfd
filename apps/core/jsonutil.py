"""The one strict JSON decoder for what users send us (the API's request body, `submit_job`'s
--file and --payload), so both accept and refuse exactly the same documents.

Strict means: no duplicate keys (Python would silently keep the last one), no NaN or Infinity
(not JSON, and no step field could use them), UTF-8 only, no string (value or key) with a
control character other than tab, newline and carriage return (PostgreSQL cannot store NUL;
the others only hide text in logs) or with a lone surrogate (`"\ud800"` is valid JSON text but
no Unicode string: it cannot be encoded, stored or logged), and nesting at most
`JOBWEAVER_MAX_JSON_DEPTH` deep. Every refusal is an `InvalidRequest` with a one-line message
`<source> is not valid JSON: <reason>`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from jobweaver.conf import settings
from jobweaver.core.errors import InvalidRequest

# C0 controls except \t \n \r, DEL, C1 controls, and UTF-16 surrogates (lone ones only reach a
# Python string through a \u escape).
FORBIDDEN_CHARACTERS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    result = dict(pairs)
    if len(result) != len(pairs):
        keys = [key for key, _ in pairs]
        duplicates = sorted({key for key in keys if keys.count(key) > 1})
        raise ValueError(f"duplicate keys: {', '.join(duplicates)}")
    return result


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def _text(document: str | bytes, *, source: str) -> str:
    if isinstance(document, bytes):
        try:
            return document.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRequest(f"{source} is not valid JSON: it is not UTF-8 text") from None
    return document


def _loads(text: str, *, source: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constants)
    except RecursionError:
        raise InvalidRequest(f"{source} is not valid JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError is a ValueError, as are the hooks' refusals
        reason = " ".join(str(exc).split())
        raise InvalidRequest(f"{source} is not valid JSON: {reason}") from None


# The escapes that can put a forbidden character into a decoded string: \b, \f and \uXXXX
# (a string's other characters are the text's own).
_FORBIDDEN_BY_ESCAPE = re.compile(r"\\[bfu]")


def loads_strict(document: str | bytes, *, source: str) -> Any:
    """Decode `document`, or raise InvalidRequest naming `source` (e.g. "request body")."""
    text = _text(document, source=source)
    value = _loads(text, source=source)
    # A text without a forbidden character or an escape that could make one has no string to
    # look into: only the depth is left to check (a batch has thousands of strings).
    strings = bool(FORBIDDEN_CHARACTERS.search(text) or _FORBIDDEN_BY_ESCAPE.search(text))
    reason = check_text_and_depth(value, settings.JOBWEAVER_MAX_JSON_DEPTH, strings=strings)
    if reason:
        raise InvalidRequest(f"{source} is not valid JSON: {reason}")
    return value


def forbidden_character(text: str) -> str | None:
    """A description of the first character we refuse in `text`, or None."""
    found = FORBIDDEN_CHARACTERS.search(text)
    if found is None:
        return None
    kind = "a lone surrogate" if "\ud800" <= found.group() <= "\udfff" else "a control character"
    return f"{kind} (U+{ord(found.group()):04X}) at position {found.start()}"


def check_text_and_depth(value: Any, max_depth: int, *, strings: bool = True) -> str | None:
    """Why a decoded document is refused (a forbidden character, too deep), or None; without
    `strings`, only too deep. Iterative, so no document can exhaust the stack here."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            problem = forbidden_character(item)
            if problem:
                return f"a string contains {problem}"
        elif isinstance(item, (dict, list)):
            if depth > max_depth:
                return f"nested more than {max_depth} levels deep"
            if not strings:
                children = item.values() if isinstance(item, dict) else item
                pending.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
                continue
            children = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in children:
                if isinstance(key, str) and forbidden_character(key):
                    return f"a key contains {forbidden_character(key)}"
                pending.append((child, depth + 1))
    return None
