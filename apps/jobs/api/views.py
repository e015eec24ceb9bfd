"""The REST API (ARCHITECTURE §8). Views parse, call one service or selector, and render."""

from __future__ import annotations

import math

from django.conf import settings
from django.urls import reverse
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.core.errors import InvalidRequest, PayloadTooLarge
from apps.core.jsonutil import loads_strict
from apps.executor.selectors import attempts_for_jobs
from apps.jobs.representation import job_to_dict
from apps.jobs.selectors import job_detail, job_get, job_list
from apps.jobs.services import job_cancel, job_retry, job_submit
from apps.jobs.validation import parse_job_request


def _read_json_body(request: Request):
    """Decode the body ourselves: size limit first, then strict JSON (apps/core/jsonutil.py)."""
    limit = settings.JOBWEAVER_MAX_REQUEST_BYTES
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"Request body exceeds {limit} bytes")
    content_type = request.content_type.split(";")[0].strip().lower()
    if content_type != "application/json":
        raise InvalidRequest("Content-Type must be application/json")
    raw = request.body
    if len(raw) > limit:
        raise PayloadTooLarge(f"Request body exceeds {limit} bytes")
    return loads_strict(raw, source="request body")


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or not (low <= int(raw) <= high):
        raise InvalidRequest(f"{name} must be an integer between {low} and {high}")
    return int(raw)


class JobListCreateView(APIView):
    def post(self, request: Request) -> Response:
        spec = parse_job_request(_read_json_body(request))
        result = job_submit(
            spec=spec,
            submitted_by=request.user,
            idempotency_key=request.headers.get("Idempotency-Key"),
            trace_id=request.headers.get("X-Trace-Id"),
        )
        job = result.job
        headers = {
            "Location": reverse("job-detail", kwargs={"job_id": str(job.id)}),
            "X-Trace-Id": job.trace_id,
        }
        if not result.created:
            return Response(job_detail(job_id=job.id), status=200, headers=headers)
        body = {"jobId": str(job.id), "traceId": job.trace_id, "status": job.execution.status}
        return Response(body, status=202, headers=headers)

    def get(self, request: Request) -> Response:
        unknown = set(request.query_params) - {"status", "type", "page", "size"}
        if unknown:
            raise InvalidRequest(f"unknown query parameter(s): {', '.join(sorted(unknown))}")
        page = _int_param(request, "page", 0, 0, 10_000_000)
        size = _int_param(request, "size", 20, 1, settings.JOBWEAVER_API_MAX_PAGE_SIZE)
        jobs, total = job_list(
            user=request.user,
            status=request.query_params.get("status") or None,
            job_type=request.query_params.get("type") or None,
            page=page,
            size=size,
        )
        attempts = attempts_for_jobs(job_ids=[job.id for job in jobs])
        return Response(
            {
                "jobs": [job_to_dict(job, attempts[job.id]) for job in jobs],
                "page": page,
                "size": size,
                "totalElements": total,
                "totalPages": math.ceil(total / size) if total else 0,
            }
        )


class JobDetailView(APIView):
    def get(self, request: Request, job_id: str) -> Response:
        return Response(job_detail(job_id=job_id, user=request.user))


class JobRetryView(APIView):
    def post(self, request: Request, job_id: str) -> Response:
        job = job_get(job_id=job_id, user=request.user)
        job_retry(job_id=job.id)
        return Response(job_detail(job_id=job.id, user=request.user))


class JobCancelView(APIView):
    def post(self, request: Request, job_id: str) -> Response:
        job = job_get(job_id=job_id, user=request.user)
        job_cancel(job_id=job.id)
        return Response(job_detail(job_id=job.id, user=request.user))
