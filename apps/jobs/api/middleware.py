"""Refuse an oversized API body before anything reads it (OWASP API4).

Runs ahead of the session and CSRF middleware: with session authentication, CSRF checking may
read a form body, and Django's own DATA_UPLOAD_MAX_MEMORY_SIZE refusal would surface as an
error page instead of the API's 413 error body.
"""

from __future__ import annotations

import re

from django.http import JsonResponse

from jobweaver.conf import settings
from jobweaver.jobs.api.errors import error_body

API_PREFIX = "/api/"
BATCH_PATH = "/api/jobs/batch"
WORKFLOWS_PATH = "/api/workflows"  # a workflow has the batch's limit (§16)
DIGITS = re.compile(r"^[0-9]{1,19}$")


def body_limit(path: str) -> int:
    if path in (BATCH_PATH, WORKFLOWS_PATH):
        return settings.JOBWEAVER_MAX_BATCH_REQUEST_BYTES
    return settings.JOBWEAVER_MAX_REQUEST_BYTES


def refused_body(request, limit: int) -> JsonResponse | None:
    """The API's 400 or 413 error body for a request whose Content-Length is not a number or is
    over `limit`; None for one that may be read. JobWeaver's views check it too
    (api/base.py), so the limit holds in a host project that does not install this middleware."""
    declared = request.META.get("CONTENT_LENGTH") or ""
    if declared and not DIGITS.match(declared):
        return JsonResponse(
            error_body(400, "API.INVALID_REQUEST", "Content-Length is not a number"), status=400
        )
    if declared and int(declared) > limit:
        return JsonResponse(
            error_body(413, "API.PAYLOAD_TOO_LARGE", f"Request body exceeds {limit} bytes"),
            status=413,
        )
    return None


class ApiBodyLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith(API_PREFIX):
            refused = refused_body(request, body_limit(request.path))
            if refused is not None:
                return refused
        return self.get_response(request)
