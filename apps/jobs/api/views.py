"""The REST API (ARCHITECTURE §8). Views parse, call one service or selector, and render."""

from __future__ import annotations

from datetime import UTC, datetime

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from jobweaver.conf import settings
from jobweaver.core.errors import InvalidRequest
from jobweaver.jobs.api import schema
from jobweaver.jobs.api.base import JobWeaverAPIView
from jobweaver.jobs.api.permissions import HasOperationPermission
from jobweaver.jobs.api.reading import int_param, page_body, page_params, read_json_body
from jobweaver.jobs.api.throttling import CancelThrottle, SubmissionThrottle
from jobweaver.jobs.models import JobType
from jobweaver.jobs.representation import job_to_dict
from jobweaver.jobs.selectors import (
    attempts_for_jobs,
    dependencies_for_jobs,
    job_attempts,
    job_detail,
    job_list,
    job_stats,
    job_to_operate,
    sees_tracebacks,
)
from jobweaver.jobs.services import (
    TRACE_ID_PATTERN,
    job_cancel,
    job_retry,
    job_submit,
    job_submit_batch,
)
from jobweaver.jobs.validation import parse_batch_request, parse_job_request

# ASCII digits only: str.isdigit() accepts "²", which int() refuses.
MAX_PAGE = 10_000_000
LIST_PARAMETERS = {
    "status",
    "type",
    "priority",
    "createdAfter",
    "createdBefore",
    "traceId",
    "sort",
    "page",
    "size",
}


def _time_param(request: Request, name: str) -> datetime | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    # An unencoded "+" in a query string arrives as a space: take it back for the offset.
    candidate = raw.strip().replace(" ", "+")
    try:
        parsed = datetime.fromisoformat(candidate)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None or len(raw) > 40:
        raise InvalidRequest(
            f"{name} must be an ISO-8601 date-time with a time zone, e.g. 2026-01-01T00:00:00Z"
        )
    try:
        return parsed.astimezone(UTC)  # PostgreSQL refuses offsets beyond ±15:59
    except OverflowError:
        raise InvalidRequest(f"{name} is out of range") from None


def _choice_param(request: Request, name: str, choices: list[str]) -> str | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if raw not in choices:
        raise InvalidRequest(f"{name} must be one of {', '.join(choices)}")
    return raw


def _trace_id_param(request: Request) -> str | None:
    raw = request.query_params.get("traceId")
    if raw is None or raw == "":
        return None
    if not TRACE_ID_PATTERN.match(raw):
        raise InvalidRequest("traceId must be 1-64 characters of letters, digits, . _ : -")
    return raw


def _submitted_headers(job) -> dict:
    return {
        "Location": reverse("job-detail", kwargs={"job_id": str(job.id)}),
        "X-Trace-Id": job.trace_id,
    }


def _accepted(job) -> dict:
    return {"jobId": str(job.id), "traceId": job.trace_id, "status": job.execution.status}


SUBMITTED_HEADERS = [
    OpenApiParameter("Location", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[200, 202]),
    OpenApiParameter("X-Trace-Id", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[200, 202]),
]


ADD_JOB = ("jobweaver_jobs.add_job",)
CHANGE_JOB = ("jobweaver_jobs.change_job",)


class JobView(JobWeaverAPIView):
    permission_classes = [HasOperationPermission]
    required_permissions: dict[str, tuple[str, ...]] = {}


class JobListCreateView(JobView):
    required_permissions = {"POST": ADD_JOB}
    throttle_classes = [SubmissionThrottle]

    @extend_schema(
        operation_id="jobs_submit",
        summary="Submit a job",
        request=schema.JobRequest,
        parameters=[schema.TRACE_HEADER, schema.IDEMPOTENCY_HEADER, *SUBMITTED_HEADERS],
        responses={
            202: OpenApiResponse(schema.JobAccepted, description="accepted, PENDING"),
            200: OpenApiResponse(schema.JobDetail, description="replay of an idempotency key"),
            **schema.SUBMIT_ERRORS,
            **schema.COMMON_ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        spec = parse_job_request(read_json_body(request))
        result = job_submit(
            spec=spec,
            submitted_by=request.user,
            idempotency_key=request.headers.get("Idempotency-Key"),
            trace_id=request.headers.get("X-Trace-Id"),
        )
        job = result.job
        headers = _submitted_headers(job)
        if not result.created:
            return Response(job_detail(job_id=job.id), status=200, headers=headers)
        return Response(_accepted(job), status=202, headers=headers)

    @extend_schema(
        operation_id="jobs_list",
        summary="List jobs (yours, or all with jobs.view_all_jobs)",
        parameters=schema.LIST_PARAMETERS,
        responses={200: schema.JobPage, **schema.COMMON_ERRORS},
    )
    def get(self, request: Request) -> Response:
        page, size = page_params(request, LIST_PARAMETERS, max_page=MAX_PAGE)
        jobs, total = job_list(
            user=request.user,
            status=request.query_params.get("status") or None,
            job_type=_choice_param(request, "type", JobType.values),
            priority=int_param(request, "priority", None, 0, 9),
            created_after=_time_param(request, "createdAfter"),
            created_before=_time_param(request, "createdBefore"),
            trace_id=_trace_id_param(request),
            sort=request.query_params.get("sort") or "-createdAt",
            page=page,
            size=size,
        )
        ids = [job.id for job in jobs]
        attempts = attempts_for_jobs(job_ids=ids)
        parents = dependencies_for_jobs(job_ids=ids)
        tracebacks = sees_tracebacks(request.user)
        details = [
            job_to_dict(job, attempts[job.id], tracebacks=tracebacks, depends_on=parents[job.id])
            for job in jobs
        ]
        return Response(page_body("jobs", details, page=page, size=size, total=total))


class JobBatchView(JobView):
    body_limit_setting = "JOBWEAVER_MAX_BATCH_REQUEST_BYTES"
    required_permissions = {"POST": ADD_JOB}
    throttle_classes = [SubmissionThrottle]

    @extend_schema(
        operation_id="jobs_submit_batch",
        summary="Submit up to JOBWEAVER_MAX_BATCH_JOBS jobs, all or none",
        request=schema.BatchRequest,
        parameters=[schema.TRACE_HEADER],
        responses={
            202: schema.BatchAccepted,
            **schema.SUBMIT_ERRORS,
            **schema.COMMON_ERRORS,
            400: OpenApiResponse(
                schema.Error, description="API.INVALID_REQUEST; `errors` names each bad item"
            ),
        },
    )
    def post(self, request: Request) -> Response:
        if "Idempotency-Key" in request.headers:
            raise InvalidRequest("Idempotency-Key is not supported on batches; use POST /api/jobs")
        body = read_json_body(request, limit=settings.JOBWEAVER_MAX_BATCH_REQUEST_BYTES)
        jobs = job_submit_batch(
            specs=parse_batch_request(body),
            submitted_by=request.user,
            trace_id=request.headers.get("X-Trace-Id"),
        )
        return Response({"jobs": [_accepted(job) for job in jobs]}, status=202)


JOB_ERRORS = {**schema.NOT_FOUND, **schema.COMMON_ERRORS}


class JobDetailView(JobView):
    @extend_schema(
        operation_id="jobs_detail",
        summary="A job with its attempts",
        parameters=[schema.JOB_ID],
        responses={200: schema.JobDetail, **JOB_ERRORS},
    )
    def get(self, request: Request, job_id: str) -> Response:
        return Response(job_detail(job_id=job_id, user=request.user))


class JobAttemptsView(JobView):
    @extend_schema(
        operation_id="jobs_attempts",
        summary="Every attempt of a job, oldest first",
        parameters=[schema.JOB_ID],
        responses={200: schema.JobAttempts, **JOB_ERRORS},
    )
    def get(self, request: Request, job_id: str) -> Response:
        return Response(job_attempts(job_id=job_id, user=request.user))


class JobRetryView(JobView):
    required_permissions = {"POST": CHANGE_JOB}
    throttle_classes = [SubmissionThrottle]  # a retry queues the work again, as a submit does

    @extend_schema(
        operation_id="jobs_retry",
        summary="Retry a FAILED or CANCELLED job with a fresh retry budget",
        request=None,
        parameters=[schema.JOB_ID],
        responses={200: schema.JobDetail, **schema.STATE_CONFLICT, **JOB_ERRORS},
    )
    def post(self, request: Request, job_id: str) -> Response:
        job = job_to_operate(job_id=job_id, user=request.user)
        job_retry(job_id=job.id)
        return Response(job_detail(job_id=job.id, user=request.user))


class JobCancelView(JobView):
    required_permissions = {"POST": CHANGE_JOB}
    throttle_classes = [CancelThrottle]

    @extend_schema(
        operation_id="jobs_cancel",
        summary="Cancel a job: at once when waiting, at its next checkpoint when running",
        request=None,
        parameters=[schema.JOB_ID],
        responses={200: schema.JobDetail, **schema.STATE_CONFLICT, **JOB_ERRORS},
    )
    def post(self, request: Request, job_id: str) -> Response:
        job = job_to_operate(job_id=job_id, user=request.user)
        job_cancel(job_id=job.id)
        return Response(job_detail(job_id=job.id, user=request.user))


class StatsView(JobView):
    @extend_schema(
        operation_id="stats",
        summary="Counts by status, dead letters, oldest due job, the last hour",
        responses={200: schema.Stats, **schema.COMMON_ERRORS},
    )
    def get(self, request: Request) -> Response:
        return Response(job_stats(user=request.user))
