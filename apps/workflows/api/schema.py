"""The OpenAPI shapes of /api/workflows (ARCHITECTURE §16), for drf-spectacular only: the views
validate with apps/workflows/validation.py and render with the selectors."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from jobweaver.jobs.api.schema import STATUSES as JOB_STATUSES
from jobweaver.jobs.api.schema import Error, JobRequest
from jobweaver.workflows.models import WorkflowStatus

STATUSES = WorkflowStatus.values  # named WorkflowStatus in the schema (ENUM_NAME_OVERRIDES)


class WorkflowJobRequest(serializers.Serializer):
    ref = serializers.RegexField(r"^[A-Za-z0-9_-]{1,64}$")
    dependsOn = serializers.ListField(child=serializers.CharField(), required=False)
    ignoreFailedDependencies = serializers.BooleanField(required=False, default=False)
    job = JobRequest()


class WorkflowRequest(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    jobs = WorkflowJobRequest(many=True)


class WorkflowJob(serializers.Serializer):
    ref = serializers.CharField()
    jobId = serializers.UUIDField()
    status = serializers.ChoiceField(choices=JOB_STATUSES)
    dependsOn = serializers.ListField(child=serializers.CharField(), help_text="refs")
    ignoreFailedDependencies = serializers.BooleanField()


class WorkflowSummary(serializers.Serializer):
    workflowId = serializers.UUIDField()
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=STATUSES)
    createdAt = serializers.DateTimeField()
    finishedAt = serializers.DateTimeField(allow_null=True)
    unfinishedJobs = serializers.IntegerField()
    failedJobs = serializers.IntegerField()


class WorkflowDetail(WorkflowSummary):
    jobs = WorkflowJob(many=True)


class WorkflowAcceptedJob(serializers.Serializer):
    ref = serializers.CharField()
    jobId = serializers.UUIDField()
    status = serializers.ChoiceField(choices=JOB_STATUSES)


class WorkflowAccepted(serializers.Serializer):
    workflowId = serializers.UUIDField()
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=STATUSES)
    jobs = WorkflowAcceptedJob(many=True)


class WorkflowPage(serializers.Serializer):
    workflows = WorkflowSummary(many=True)
    page = serializers.IntegerField()
    size = serializers.IntegerField()
    totalElements = serializers.IntegerField()
    totalPages = serializers.IntegerField()


WORKFLOW_ID = OpenApiParameter("workflow_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
LIST_PARAMETERS = [
    OpenApiParameter("status", OpenApiTypes.STR, enum=STATUSES),
    OpenApiParameter("page", OpenApiTypes.INT, description="0-based"),
    OpenApiParameter("size", OpenApiTypes.INT, description="1 to JOBWEAVER_API_MAX_PAGE_SIZE"),
]
NOT_FOUND = {
    404: OpenApiResponse(
        Error, description="API.WORKFLOW_NOT_FOUND: no such workflow, or not yours"
    )
}
STATE_CONFLICT = {
    409: OpenApiResponse(
        Error, description="API.INVALID_STATE_TRANSITION: the workflow has finished already"
    )
}
