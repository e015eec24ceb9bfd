"""The checks every validator of a JSON request shares: exact types, bounds, known fields.

Pure (no ORM). Each refusal is an `InvalidRequest` naming the offending field by its `path`.
Numbers must be JSON integers: no strings, no booleans, no floats.
"""

from __future__ import annotations

from typing import Any

from jobweaver.core.errors import InvalidRequest
from jobweaver.core.jsonutil import forbidden_character


def type_name(value: Any) -> str:
    return {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def checked_int(value: Any, path: str, low: int, high: int | None = None) -> int:
    if type(value) is not int:
        raise InvalidRequest(f"{path} must be an integer, got {type_name(value)}")
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidRequest(f"{path} must be {bounds}, got {value}")
    return value


def checked_str(value: Any, path: str, max_len: int, *, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{path} must be a string, got {type_name(value)}")
    if len(value) > max_len:
        raise InvalidRequest(f"{path} must be at most {max_len} characters, got {len(value)}")
    problem = forbidden_character(value)
    if problem:
        raise InvalidRequest(f"{path} contains {problem}")
    if not allow_empty and not value.strip():
        raise InvalidRequest(f"{path} must not be empty")
    return value


def checked_bool(value: Any, path: str) -> bool:
    if type(value) is not bool:
        raise InvalidRequest(f"{path} must be a boolean, got {type_name(value)}")
    return value


def checked_object(value: Any, path: str, allowed: set[str], required: set[str]) -> dict:
    if not isinstance(value, dict):
        raise InvalidRequest(f"{path} must be an object, got {type_name(value)}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise InvalidRequest(f"{path} has unknown field(s): {', '.join(unknown)}")
    missing = sorted(required - set(value))
    if missing:
        raise InvalidRequest(f"{path} is missing required field(s): {', '.join(missing)}")
    return value
