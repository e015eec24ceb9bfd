"""/api/schedules: recurring jobs over the API, with the jobs API's conventions (error body and
codes, token or session authentication, model permissions, camelCase, strict JSON).

  GET    /api/schedules                  list (yours, or all with jobs.view_all_jobs)
  POST   /api/schedules                  create → 201 + Location
  GET    /api/schedules/{name}           one schedule
  PATCH  /api/schedules/{name}           change some fields (enabled too)
  DELETE /api/schedules/{name}           → 204; the jobs it submitted stay
  POST   /api/schedules/{name}/pause     = PATCH {"enabled": false}
  POST   /api/schedules/{name}/resume    = PATCH {"enabled": true}: from the next slot after now

Names are per owner (ARCHITECTURE §17): `{name}` is one of yours; operators address another
owner's with `?owner=<username>` (and the list takes it as a filter). Another owner's schedule
is a 404 to anyone who may not see it, the same as a missing one; acting on it needs
jobs.operate_all_jobs (403 otherwise).

Changing what a schedule submits or when (PATCH of anything but `enabled`) makes the requesting
user its owner: it submits as them from then on, checked against their permissions (add_job,
the template's priority). Pause and resume leave the owner as it was.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from jobweaver.core.errors import InvalidRequest
from jobweaver.jobs.api.base import JobWeaverAPIView
from jobweaver.jobs.api.permissions import HasOperationPermission
from jobweaver.jobs.api.reading import no_query_parameters, read_json_body
from jobweaver.jobs.checks import checked_str
from jobweaver.schedules.api import schema
from jobweaver.schedules.selectors import schedule_get, schedule_list, schedule_to_dict
from jobweaver.schedules.services import (
    schedule_create,
    schedule_delete,
    schedule_disable,
    schedule_enable,
    schedule_update,
)
from jobweaver.schedules.validation import parse_schedule_request

VIEW = ("jobweaver_schedules.view_schedule",)
# A schedule submits jobs as its owner: creating one needs add_job too (§17).
ADD = ("jobweaver_schedules.add_schedule", "jobweaver_jobs.add_job")
CHANGE = ("jobweaver_schedules.change_schedule",)
DELETE = ("jobweaver_schedules.delete_schedule",)
MAX_USERNAME_CHARS = 255


def _owner_param(request: Request) -> str | None:
    """`?owner=<username>`, the only query parameter of the schedules API; absent or empty:
    none (the requesting user's own)."""
    unknown = sorted(set(request.query_params) - {"owner"})
    if unknown:
        raise InvalidRequest(f"unknown query parameter(s): {', '.join(unknown)}")
    raw = request.query_params.get("owner")
    if raw is None or raw == "":
        return None
    return checked_str(raw, "owner", MAX_USERNAME_CHARS)


class ScheduleView(JobWeaverAPIView):
    permission_classes = [HasOperationPermission]
    required_permissions: dict[str, tuple[str, ...]] = {}


class ScheduleListCreateView(ScheduleView):
    required_permissions = {"GET": VIEW, "POST": ADD}

    @extend_schema(
        operation_id="schedules_list",
        summary="List schedules (yours, or all with jobs.view_all_jobs), by name",
        parameters=[schema.OWNER_FILTER],
        responses={200: schema.ScheduleList, **schema.COMMON_ERRORS},
    )
    def get(self, request: Request) -> Response:
        schedules = schedule_list(user=request.user, owner=_owner_param(request))
        return Response({"schedules": [schedule_to_dict(s) for s in schedules]})

    @extend_schema(
        operation_id="schedules_create",
        summary="Create a schedule: a cron (with a time zone) or an interval, and a job template",
        request=schema.ScheduleRequest,
        parameters=[schema.LOCATION],
        responses={
            201: OpenApiResponse(schema.ScheduleDetail, description="created"),
            **schema.PAYLOAD_TOO_LARGE,
            **schema.COMMON_ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        no_query_parameters(request)  # a schedule is created as the requesting user's own
        fields = parse_schedule_request(read_json_body(request), partial=False)
        schedule = schedule_create(**fields, owner=request.user)
        location = reverse("schedule-detail", kwargs={"name": schedule.name})
        return Response(schedule_to_dict(schedule), status=201, headers={"Location": location})


class ScheduleDetailView(ScheduleView):
    required_permissions = {"GET": VIEW, "PATCH": CHANGE, "DELETE": DELETE}

    @extend_schema(
        operation_id="schedules_detail",
        summary="One schedule, with its next slot and its last submission",
        parameters=[schema.NAME, schema.OWNER],
        responses={200: schema.ScheduleDetail, **schema.NOT_FOUND, **schema.COMMON_ERRORS},
    )
    def get(self, request: Request, name: str) -> Response:
        owner = _owner_param(request)
        return Response(schedule_to_dict(schedule_get(name=name, owner=owner, user=request.user)))

    @extend_schema(
        operation_id="schedules_update",
        summary="Change some fields; a new rule (or enabled: true) starts at its next slot. "
        "Changing anything but enabled makes you the owner: it submits as you from then on",
        request=schema.ScheduleChange,
        parameters=[schema.NAME, schema.OWNER],
        responses={
            200: schema.ScheduleDetail,
            **schema.NOT_FOUND,
            **schema.CODE_SCHEDULE,
            **schema.PAYLOAD_TOO_LARGE,
            **schema.COMMON_ERRORS,
        },
    )
    def patch(self, request: Request, name: str) -> Response:
        owner = _owner_param(request)
        changes = parse_schedule_request(read_json_body(request), partial=True)
        schedule = schedule_update(name=name, owner=owner, changes=changes, user=request.user)
        return Response(schedule_to_dict(schedule))

    @extend_schema(
        operation_id="schedules_delete",
        summary="Delete a schedule (the jobs it submitted stay)",
        parameters=[schema.NAME, schema.OWNER],
        responses={
            204: None,
            **schema.NOT_FOUND,
            **schema.CODE_SCHEDULE,
            **schema.COMMON_ERRORS,
        },
    )
    def delete(self, request: Request, name: str) -> Response:
        schedule_delete(name=name, owner=_owner_param(request), user=request.user)
        return Response(status=204)


class SchedulePauseView(ScheduleView):
    required_permissions = {"POST": CHANGE}

    @extend_schema(
        operation_id="schedules_pause",
        summary="Pause a schedule: no slot fires until it is resumed",
        request=None,
        parameters=[schema.NAME, schema.OWNER],
        responses={
            200: schema.ScheduleDetail,
            **schema.NOT_FOUND,
            **schema.CODE_SCHEDULE,
            **schema.COMMON_ERRORS,
        },
    )
    def post(self, request: Request, name: str) -> Response:
        owner = _owner_param(request)
        return Response(
            schedule_to_dict(schedule_disable(name=name, owner=owner, user=request.user))
        )


class ScheduleResumeView(ScheduleView):
    required_permissions = {"POST": CHANGE}

    @extend_schema(
        operation_id="schedules_resume",
        summary="Resume a schedule at its first slot after now (paused slots are not caught up)",
        request=None,
        parameters=[schema.NAME, schema.OWNER],
        responses={
            200: schema.ScheduleDetail,
            **schema.NOT_FOUND,
            **schema.CODE_SCHEDULE,
            **schema.COMMON_ERRORS,
        },
    )
    def post(self, request: Request, name: str) -> Response:
        owner = _owner_param(request)
        return Response(
            schedule_to_dict(schedule_enable(name=name, owner=owner, user=request.user))
        )
