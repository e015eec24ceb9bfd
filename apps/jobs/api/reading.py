"""How every API view reads a request: the body as strict JSON within a size limit, and no
query parameters where an operation takes none. Shared by the jobs, controls and schedules
views, so each route refuses the same bad input with the same error."""

from __future__ import annotations

import math
import re

from rest_framework.request import Request

from jobweaver.conf import settings
from jobweaver.core.errors import InvalidRequest, PayloadTooLarge
from jobweaver.core.jsonutil import loads_strict

DIGITS = re.compile(r"^[0-9]{1,9}$")


def read_json_body(request: Request, *, limit: int | None = None):
    """Decode the body ourselves: size limit first, then strict JSON (apps/core/jsonutil.py)."""
    limit = limit or settings.JOBWEAVER_MAX_REQUEST_BYTES
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if DIGITS.match(declared) and int(declared) > limit:
        raise PayloadTooLarge(f"Request body exceeds {limit} bytes")
    content_type = request.content_type.split(";")[0].strip().lower()
    if content_type != "application/json":
        raise InvalidRequest("Content-Type must be application/json")
    raw = request.body
    if len(raw) > limit:
        raise PayloadTooLarge(f"Request body exceeds {limit} bytes")
    return loads_strict(raw, source="request body")


def no_query_parameters(request: Request) -> None:
    if request.query_params:
        unknown = ", ".join(sorted(request.query_params))
        raise InvalidRequest(f"unknown query parameter(s): {unknown}")


def int_param(request: Request, name: str, default: int | None, low: int, high: int):
    """Query parameter `name` as an integer from `low` to `high` (ASCII digits only), or
    `default` when it is absent or empty; InvalidRequest otherwise."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not DIGITS.match(raw) or not (low <= int(raw) <= high):
        raise InvalidRequest(f"{name} must be an integer between {low} and {high}")
    return int(raw)


def page_params(request: Request, allowed: set[str], *, max_page: int) -> tuple[int, int]:
    """A list endpoint's `page` (0-based) and `size`, after refusing any query parameter not
    in `allowed`."""
    unknown = set(request.query_params) - allowed
    if unknown:
        raise InvalidRequest(f"unknown query parameter(s): {', '.join(sorted(unknown))}")
    page = int_param(request, "page", 0, 0, max_page)
    size = int_param(request, "size", 20, 1, settings.JOBWEAVER_API_MAX_PAGE_SIZE)
    return page, size


def page_body(key: str, items: list, *, page: int, size: int, total: int) -> dict:
    """The seeds' page envelope: the items under `key`, then page, size and the totals."""
    return {
        key: items,
        "page": page,
        "size": size,
        "totalElements": total,
        "totalPages": math.ceil(total / size) if total else 0,
    }
