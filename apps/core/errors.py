"""The one exception hierarchy of the domain. Each error knows its API error code and status;
apps/jobs/api/errors.py turns every error into the API's error body (ARCHITECTURE §8)."""

from __future__ import annotations


class JobWeaverError(Exception):
    error_code = "API.INTERNAL_ERROR"
    http_status = 500

    def __init__(self, message: str, *, job_id: object | None = None):
        super().__init__(message)
        self.message = message
        self.job_id = str(job_id) if job_id is not None else None


class InvalidRequest(JobWeaverError):
    error_code = "API.INVALID_REQUEST"
    http_status = 400


class PayloadTooLarge(JobWeaverError):
    error_code = "API.PAYLOAD_TOO_LARGE"
    http_status = 413


class JobNotFound(JobWeaverError):
    error_code = "API.JOB_NOT_FOUND"
    http_status = 404


class WorkflowNotFound(JobWeaverError):
    """No such workflow, or one this user may not see (ARCHITECTURE §16, §17)."""

    error_code = "API.WORKFLOW_NOT_FOUND"
    http_status = 404


class InvalidStateTransition(JobWeaverError):
    error_code = "API.INVALID_STATE_TRANSITION"
    http_status = 409


class IdempotencyConflict(JobWeaverError):
    error_code = "API.IDEMPOTENCY_CONFLICT"
    http_status = 409


class InvalidBatch(InvalidRequest):
    """A batch with rejected items: `errors` names each one, `[{"index", "message"}, ...]`."""

    def __init__(self, message: str, *, errors: list[dict]):
        super().__init__(message)
        self.errors = errors


class Forbidden(JobWeaverError):
    """Authenticated, but this user may not do this (a permission is missing)."""

    error_code = "API.FORBIDDEN"
    http_status = 403


class QuotaExceeded(JobWeaverError):
    """A per-user limit on submissions is reached; try again later."""

    error_code = "API.THROTTLED"
    http_status = 429

    def __init__(self, message: str, *, retry_after: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after
