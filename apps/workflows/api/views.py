"""/api/workflows (ARCHITECTURE §16), with the jobs API's conventions: the error body, token or
session authentication, the job permissions (add_job to create, view_job to read, change_job
to cancel), owner scoping (another owner's workflow is a 404), camelCase, strict JSON.

  POST /api/workflows                      create, all or nothing → 202 + Location
  GET  /api/workflows?status=&page=&size=  list, newest first
  GET  /api/workflows/{id}                 one, with its jobs and their dependencies
  POST /api/workflows/{id}/cancel          every unfinished job → CANCELLED → 200
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from jobweaver.conf import settings
from jobweaver.core.errors import Forbidden, InvalidRequest
from jobweaver.jobs.api import schema as job_schema
from jobweaver.jobs.api.base import JobWeaverAPIView
from jobweaver.jobs.api.permissions import HasOperationPermission
from jobweaver.jobs.api.reading import page_body, page_params, read_json_body
from jobweaver.jobs.api.throttling import CancelThrottle, SubmissionThrottle
from jobweaver.jobs.selectors import may_operate
from jobweaver.jobs.services import TRACE_ID_PATTERN
from jobweaver.workflows.api import schema
from jobweaver.workflows.selectors import workflow_get, workflow_list, workflow_to_dict
from jobweaver.workflows.services import workflow_cancel, workflow_submit
from jobweaver.workflows.validation import parse_workflow_request

ADD_JOB = ("jobweaver_jobs.add_job",)
VIEW_JOB = ("jobweaver_jobs.view_job",)
CHANGE_JOB = ("jobweaver_jobs.change_job",)
LIST_PARAMETERS = {"status", "page", "size"}
MAX_PAGE = 10_000_000


class WorkflowView(JobWeaverAPIView):
    permission_classes = [HasOperationPermission]
    required_permissions: dict[str, tuple[str, ...]] = {"GET": VIEW_JOB}


class WorkflowListCreateView(WorkflowView):
    body_limit_setting = "JOBWEAVER_MAX_BATCH_REQUEST_BYTES"
    required_permissions = {"GET": VIEW_JOB, "POST": ADD_JOB}
    throttle_classes = [SubmissionThrottle]  # POST only: a workflow is one submission (§17)

    @extend_schema(
        operation_id="workflows_submit",
        summary="Submit a workflow: jobs and their dependencies, all or none",
        request=schema.WorkflowRequest,
        parameters=[job_schema.TRACE_HEADER],
        responses={
            202: schema.WorkflowAccepted,
            413: job_schema.SUBMIT_ERRORS[413],
            **job_schema.COMMON_ERRORS,
            400: OpenApiResponse(
                job_schema.Error,
                description="API.INVALID_REQUEST naming the problem; `errors` names bad jobs",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        body = read_json_body(request, limit=settings.JOBWEAVER_MAX_BATCH_REQUEST_BYTES)
        trace_id = request.headers.get("X-Trace-Id")
        if trace_id is not None and not TRACE_ID_PATTERN.match(trace_id):
            raise InvalidRequest("X-Trace-Id must be 1-64 characters of letters, digits, . _ : -")
        workflow = workflow_submit(
            spec=parse_workflow_request(body), submitted_by=request.user, trace_id=trace_id
        )
        accepted = {
            "workflowId": str(workflow.id),
            "name": workflow.name,
            "status": workflow.status,
            "jobs": [
                {"ref": ref, "jobId": str(job.id), "status": job.execution.status}
                for ref, job in workflow.jobs_by_ref.items()
            ],
        }
        location = reverse("workflow-detail", kwargs={"workflow_id": str(workflow.id)})
        return Response(accepted, status=202, headers={"Location": location})

    @extend_schema(
        operation_id="workflows_list",
        summary="List workflows (yours, or all with jobs.view_all_jobs), newest first",
        parameters=schema.LIST_PARAMETERS,
        responses={200: schema.WorkflowPage, **job_schema.COMMON_ERRORS},
    )
    def get(self, request: Request) -> Response:
        page, size = page_params(request, LIST_PARAMETERS, max_page=MAX_PAGE)
        workflows, total = workflow_list(
            user=request.user,
            status=request.query_params.get("status") or None,
            page=page,
            size=size,
        )
        summaries = [workflow_to_dict(w, jobs=False) for w in workflows]
        return Response(page_body("workflows", summaries, page=page, size=size, total=total))


class WorkflowDetailView(WorkflowView):
    @extend_schema(
        operation_id="workflows_detail",
        summary="A workflow with its jobs, their statuses and dependencies",
        parameters=[schema.WORKFLOW_ID],
        responses={200: schema.WorkflowDetail, **schema.NOT_FOUND, **job_schema.COMMON_ERRORS},
    )
    def get(self, request: Request, workflow_id: str) -> Response:
        workflow = workflow_get(workflow_id=workflow_id, user=request.user)
        return Response(workflow_to_dict(workflow))


class WorkflowCancelView(WorkflowView):
    required_permissions = {"POST": CHANGE_JOB}
    throttle_classes = [CancelThrottle]

    @extend_schema(
        operation_id="workflows_cancel",
        summary="Cancel a workflow: its waiting jobs at once, its running ones at their next "
        "checkpoint",
        request=None,
        parameters=[schema.WORKFLOW_ID],
        responses={
            200: schema.WorkflowDetail,
            **schema.STATE_CONFLICT,
            **schema.NOT_FOUND,
            **job_schema.COMMON_ERRORS,
        },
    )
    def post(self, request: Request, workflow_id: str) -> Response:
        workflow = workflow_get(workflow_id=workflow_id, user=request.user)
        if not may_operate(request.user, workflow.submitted_by_id):
            raise Forbidden(
                "acting on another user's workflow needs jobweaver_jobs.operate_all_jobs"
            )
        return Response(workflow_to_dict(workflow_cancel(workflow_id=workflow.id)))
