"""The one exception handler of the API: every error becomes
`{"timestamp", "status", "errorCode", "message", "jobId"}` (ARCHITECTURE §8)."""

from __future__ import annotations

import logging
import math

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from django.utils import timezone
from rest_framework import exceptions as drf
from rest_framework.response import Response

from jobweaver.core.db import lock_timed_out, statement_cancelled
from jobweaver.core.errors import InvalidBatch, JobWeaverError
from jobweaver.core.timeutil import iso

logger = logging.getLogger(__name__)

# A request that waited JOBWEAVER_DB_LOCK_TIMEOUT_SECONDS for a lock (a row, or a submitter's
# cap or unique-key lock held by concurrent requests) changed nothing: its transaction rolled
# back. It is contention, not a fault, so the client is told to come back rather than given a
# 500: 429 with Retry-After, as for the throttle.
LOCK_BUSY_RETRY_AFTER_SECONDS = 1


def error_body(status: int, code: str, message: str, job_id: str | None = None) -> dict:
    return {
        "timestamp": iso(timezone.now()),
        "status": status,
        "errorCode": code,
        "message": message,
        "jobId": job_id,
    }


def error_response(status: int, code: str, message: str, job_id: str | None = None, headers=None):
    return Response(error_body(status, code, message, job_id), status=status, headers=headers)


def _drf_message(detail) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_drf_message(value)}" for key, value in detail.items())
    if isinstance(detail, list):
        return "; ".join(_drf_message(item) for item in detail)
    return str(detail)


def api_exception_handler(exc, context):
    if isinstance(exc, JobWeaverError):
        retry_after = getattr(exc, "retry_after", None)
        headers = {"Retry-After": str(retry_after)} if retry_after else None
        response = error_response(
            exc.http_status, exc.error_code, exc.message, exc.job_id, headers=headers
        )
        if isinstance(exc, InvalidBatch):
            response.data["errors"] = exc.errors
        return response
    if lock_timed_out(exc):
        logger.warning("API request gave up waiting for a database lock: %s", exc)
        return error_response(
            429,
            "API.THROTTLED",
            "Busy: the request waited too long for a database lock held by concurrent "
            "requests and changed nothing; retry",
            headers={"Retry-After": str(LOCK_BUSY_RETRY_AFTER_SECONDS)},
        )
    if statement_cancelled(exc):
        # A server fault (§8's 500), but a known one: say what happened, log no traceback.
        logger.warning(
            "API request: the database cancelled a statement (over "
            "JOBWEAVER_DB_STATEMENT_TIMEOUT_SECONDS, or by an operator): %s",
            exc,
        )
        return error_response(
            500,
            "API.INTERNAL_ERROR",
            "The database cancelled a statement of this request that ran too long; its "
            "transaction was rolled back and nothing was changed",
        )
    if isinstance(exc, RequestDataTooBig):
        return error_response(413, "API.PAYLOAD_TOO_LARGE", "Request body too large")
    if isinstance(exc, Http404):
        return error_response(404, "API.JOB_NOT_FOUND", "Not found")
    if isinstance(exc, DjangoPermissionDenied):
        exc = drf.PermissionDenied()
    if isinstance(exc, drf.APIException):
        headers = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None):
            headers["Retry-After"] = str(math.ceil(exc.wait))  # whole seconds, never 0
        status, message = exc.status_code, _drf_message(exc.detail)
        if isinstance(exc, (drf.NotAuthenticated, drf.AuthenticationFailed)):
            # DRF answers 403 when no authenticator offers a challenge; the contract says 401.
            return error_response(
                401,
                "API.UNAUTHENTICATED",
                message,
                headers=headers or {"WWW-Authenticate": "Token"},
            )
        code = {
            403: "API.FORBIDDEN",
            404: "API.JOB_NOT_FOUND",
            413: "API.PAYLOAD_TOO_LARGE",
            429: "API.THROTTLED",
        }.get(status, "API.INVALID_REQUEST" if status < 500 else "API.INTERNAL_ERROR")
        return error_response(status, code, message, headers=headers)
    logger.exception("unhandled API error")
    return error_response(500, "API.INTERNAL_ERROR", "Internal server error")
