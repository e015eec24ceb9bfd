"""/api/schedules: recurring jobs over the API, with the jobs API's conventions (error body and
codes, token or session authentication, model permissions, camelCase, strict JSON).

  GET    /api/schedules                  list (yours, or all with schedules.view_all_schedules)
  POST   /api/schedules                  create → 201 + Location
  GET    /api/schedules/{name}           one schedule
  PATCH  /api/schedules/{name}           change some fields (enabled too)
  DELETE /api/schedules/{name}           → 204; the jobs it submitted stay
  POST   /api/schedules/{name}/pause     = PATCH {"enabled": false}
  POST   /api/schedules/{name}/resume    = PATCH {"enabled": true}: from the next slot after now
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from jobweaver.jobs.api.base import JobWeaverAPIView
from jobweaver.jobs.api.permissions import HasOperationPermission
from jobweaver.jobs.api.reading import no_query_parameters, read_json_body
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
ADD = ("jobweaver_schedules.add_schedule",)
CHANGE = ("jobweaver_schedules.change_schedule",)
DELETE = ("jobweaver_schedules.delete_schedule",)


class ScheduleView(JobWeaverAPIView):
    permission_classes = [HasOperationPermission]
    required_permissions: dict[str, tuple[str, ...]] = {}


class ScheduleListCreateView(ScheduleView):
    required_permissions = {"GET": VIEW, "POST": ADD}

    @extend_schema(
        operation_id="schedules_list",
        summary="List schedules (yours, or all with schedules.view_all_schedules), by name",
        responses={200: schema.ScheduleList, **schema.COMMON_ERRORS},
    )
    def get(self, request: Request) -> Response:
        no_query_parameters(request)
        schedules = schedule_list(user=request.user)
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
        fields = parse_schedule_request(read_json_body(request), partial=False)
        schedule = schedule_create(**fields, created_by=request.user)
        location = reverse("schedule-detail", kwargs={"name": schedule.name})
        return Response(schedule_to_dict(schedule), status=201, headers={"Location": location})


class ScheduleDetailView(ScheduleView):
    required_permissions = {"GET": VIEW, "PATCH": CHANGE, "DELETE": DELETE}

    @extend_schema(
        operation_id="schedules_detail",
        summary="One schedule, with its next slot and its last submission",
        parameters=[schema.NAME],
        responses={200: schema.ScheduleDetail, **schema.NOT_FOUND, **schema.COMMON_ERRORS},
    )
    def get(self, request: Request, name: str) -> Response:
        return Response(schedule_to_dict(schedule_get(name=name, user=request.user)))

    @extend_schema(
        operation_id="schedules_update",
        summary="Change some fields; a new rule (or enabled: true) starts at its next slot",
        request=schema.ScheduleChange,
        parameters=[schema.NAME],
        responses={
            200: schema.ScheduleDetail,
            **schema.NOT_FOUND,
            **schema.PAYLOAD_TOO_LARGE,
            **schema.COMMON_ERRORS,
        },
    )
    def patch(self, request: Request, name: str) -> Response:
        changes = parse_schedule_request(read_json_body(request), partial=True)
        schedule = schedule_update(name=name, changes=changes, user=request.user)
        return Response(schedule_to_dict(schedule))

    @extend_schema(
        operation_id="schedules_delete",
        summary="Delete a schedule (the jobs it submitted stay)",
        parameters=[schema.NAME],
        responses={204: None, **schema.NOT_FOUND, **schema.COMMON_ERRORS},
    )
    def delete(self, request: Request, name: str) -> Response:
        schedule_delete(name=name, user=request.user)
        return Response(status=204)


class SchedulePauseView(ScheduleView):
    required_permissions = {"POST": CHANGE}

    @extend_schema(
        operation_id="schedules_pause",
        summary="Pause a schedule: no slot fires until it is resumed",
        request=None,
        parameters=[schema.NAME],
        responses={200: schema.ScheduleDetail, **schema.NOT_FOUND, **schema.COMMON_ERRORS},
    )
    def post(self, request: Request, name: str) -> Response:
        return Response(schedule_to_dict(schedule_disable(name=name, user=request.user)))


class ScheduleResumeView(ScheduleView):
    required_permissions = {"POST": CHANGE}

    @extend_schema(
        operation_id="schedules_resume",
        summary="Resume a schedule at its first slot after now (paused slots are not caught up)",
        request=None,
        parameters=[schema.NAME],
        responses={200: schema.ScheduleDetail, **schema.NOT_FOUND, **schema.COMMON_ERRORS},
    )
    def post(self, request: Request, name: str) -> Response:
        return Response(schedule_to_dict(schedule_enable(name=name, user=request.user)))
