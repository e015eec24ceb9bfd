"""Validation of a TASK job's payload (ARCHITECTURE §13): `{"task", "args", "kwargs"}`.

Pure (no ORM), used by every entry point — the API and `submit_job` through
`jobweaver.jobs.validation.parse_job_request`, and `JobWeaverBackend.enqueue` — so all refuse the
same payloads with the same one-line reasons. The task must be registered (looked up, never
imported); arguments must be JSON (a tuple becomes an array, anything else that JSON cannot
hold is refused rather than silently converted); the arguments must fit the function's
signature; the whole payload is capped at `JOBWEAVER_TASK_MAX_PAYLOAD_BYTES`.
"""

from __future__ import annotations

import inspect
import json
import math
import re
from typing import Any

from jobweaver.conf import settings
from jobweaver.core.errors import InvalidRequest
from jobweaver.jobs.python_tasks.registry import registry_get

PAYLOAD_FIELDS = {"task", "args", "kwargs"}
MAX_TASK_PATH_CHARS = 255
MAX_NESTING = 64
TASK_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")


def _type_name(value: Any) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}
    names.update({list: "array", tuple: "array", dict: "object"})
    return names.get(type(value), type(value).__name__)


def json_only(value: Any, path: str, depth: int = 0) -> Any:
    """`value` as plain JSON data (tuples become lists), or InvalidRequest naming `path`."""
    if depth > MAX_NESTING:
        raise InvalidRequest(f"{path} is nested more than {MAX_NESTING} levels deep")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidRequest(f"{path} must be a finite number, got {value}")
        return value
    if isinstance(value, (list, tuple)):
        return [json_only(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidRequest(f"{path} keys must be strings, got {_type_name(key)}")
            result[key] = json_only(item, f"{path}.{key}", depth + 1)
        return result
    raise InvalidRequest(
        f"{path} must be JSON (string, number, boolean, null, array or object), "
        f"got {_type_name(value)}"
    )


def validate_task_payload(payload: Any) -> dict:
    """Validate a TASK payload and return it normalized: `{"task", "args", "kwargs"}`."""
    if not isinstance(payload, dict):
        raise InvalidRequest(f"payload must be an object, got {_type_name(payload)}")
    unknown = sorted(set(payload) - PAYLOAD_FIELDS)
    if unknown:
        raise InvalidRequest(f"payload has unknown field(s): {', '.join(map(str, unknown))}")
    if "task" not in payload:
        raise InvalidRequest("payload is missing required field(s): task")
    path = payload["task"]
    if not isinstance(path, str):
        raise InvalidRequest(f"payload.task must be a string, got {_type_name(path)}")
    if len(path) > MAX_TASK_PATH_CHARS or not TASK_PATH.match(path):
        raise InvalidRequest(
            "payload.task must be the dotted path of a registered task, "
            "e.g. jobweaver_site.examples.tasks.add"
        )
    registered = registry_get(path)  # a lookup only: a client's path is never imported
    if registered is None:
        raise InvalidRequest(f"payload.task {path!r} is not a registered task")
    args = payload.get("args", [])
    if not isinstance(args, (list, tuple)):
        raise InvalidRequest(f"payload.args must be an array, got {_type_name(args)}")
    kwargs = payload.get("kwargs", {})
    if not isinstance(kwargs, dict):
        raise InvalidRequest(f"payload.kwargs must be an object, got {_type_name(kwargs)}")
    normalized = {
        "task": path,
        "args": json_only(args, "payload.args"),
        "kwargs": json_only(kwargs, "payload.kwargs"),
    }
    _check_signature(registered, normalized["args"], normalized["kwargs"])
    size = len(json.dumps(normalized, separators=(",", ":"), ensure_ascii=False).encode())
    limit = settings.JOBWEAVER_TASK_MAX_PAYLOAD_BYTES
    if size > limit:
        raise InvalidRequest(f"payload is {size} bytes as JSON; at most {limit} allowed")
    return normalized


def _check_signature(registered, args: list, kwargs: dict) -> None:
    """Refuse arguments the function cannot take now, rather than fail every attempt later."""
    signature = inspect.signature(registered.func)
    leading = [None] if registered.takes_context else []  # the context, passed by the runner
    if registered.takes_context and "context" in kwargs:
        raise InvalidRequest("payload.kwargs must not set 'context': the runner passes it")
    try:
        signature.bind(*leading, *args, **kwargs)
    except TypeError as exc:
        parameters = list(signature.parameters.values())[len(leading) :]
        shown = signature.replace(
            parameters=[p.replace(annotation=p.empty) for p in parameters],
            return_annotation=signature.empty,
        )
        raise InvalidRequest(
            f"payload arguments do not fit {registered.func.__name__}{shown}: {exc}"
        ) from None
