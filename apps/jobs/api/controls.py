"""/api/pauses and /api/limits: the dispatch controls over the API, with the jobs API's
conventions (error body and codes, token or session authentication, model permissions,
camelCase, strict JSON). What they mean for dispatch: apps/engine/claim/rules.py.

  GET    /api/pauses                    {"pauses": [...]}, by scope and name
  POST   /api/pauses                    {"scope", "name", "reason"?} → 201 new, 200 already paused
  DELETE /api/pauses/{scope}/{name}     resume → 204; 404 when not paused
  GET    /api/limits                    {"limits": [...]}, by pattern
  PUT    /api/limits/{pattern}          {"maxRunning"?, "maxPerSecond"?, "global"?} → 201 new,
                                        200 replaced
  DELETE /api/limits/{pattern}          → 204; 404 when there is no such limit
  GET    /api/queues                    {"queues": [...]}, by name (ARCHITECTURE §15)
  PUT    /api/queues/{name}             {"maxRunning"?, "weight"?} → 200 with the queue

Reading the pauses or the limits is an operator's (§17): it needs jobs.view_all_jobs or the
permission to change them; reading the queues needs a user (each sees their own work in them).
Changing needs scheduler.change_pause, scheduler.change_concurrencylimit or
scheduler.change_queue (staff status grants nothing).
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from jobweaver.core.errors import InvalidRequest, JobNotFound
from jobweaver.jobs.api import schema
from jobweaver.jobs.api.base import JobWeaverAPIView
from jobweaver.jobs.api.permissions import HasOperationPermission
from jobweaver.jobs.api.reading import no_query_parameters, read_json_body
from jobweaver.jobs.selectors import VIEW_ALL_JOBS
from jobweaver.scheduler.selectors import (
    concurrency_limit_list,
    limit_to_dict,
    pause_list,
    pause_to_dict,
    queue_get,
    queue_list,
)
from jobweaver.scheduler.services import (
    UNCHANGED,
    concurrency_limit_delete,
    concurrency_limit_set,
    queue_pause_ensure,
    queue_resume,
    queue_settings_set,
)

CHANGE_PAUSE = ("jobweaver_scheduler.change_pause",)
CHANGE_LIMIT = ("jobweaver_scheduler.change_concurrencylimit",)
PAUSE_FIELDS = {"scope", "name", "reason"}
LIMIT_FIELDS = {"maxRunning", "maxPerSecond", "global"}
CHANGE_QUEUE = ("jobweaver_scheduler.change_queue",)
QUEUE_FIELDS = {"maxRunning", "weight"}


def _fields(body, allowed: set[str], required: set[str] = frozenset()) -> dict:
    """The request body as an object with no unknown and no missing field."""
    if not isinstance(body, dict):
        raise InvalidRequest("request body must be an object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidRequest(f"request body has unknown field(s): {', '.join(unknown)}")
    missing = sorted(required - set(body))
    if missing:
        raise InvalidRequest(f"request body is missing required field(s): {', '.join(missing)}")
    return body


class ControlView(JobWeaverAPIView):
    permission_classes = [HasOperationPermission]
    required_permissions: dict[str, tuple[str, ...]] = {}


class PauseListCreateView(ControlView):
    required_permissions = {"POST": CHANGE_PAUSE}
    any_permissions = {"GET": (VIEW_ALL_JOBS, *CHANGE_PAUSE)}

    @extend_schema(
        operation_id="pauses_list",
        summary="Paused queues and job types (operators: view_all_jobs or change_pause)",
        responses={200: schema.PauseList, **schema.COMMON_ERRORS},
    )
    def get(self, request: Request) -> Response:
        no_query_parameters(request)
        return Response({"pauses": [pause_to_dict(pause) for pause in pause_list()]})

    @extend_schema(
        operation_id="pauses_create",
        summary="Pause a queue or a job type: nothing of it starts; deliveries not yet started "
        "are taken back; running work finishes; waiting work stays PENDING",
        request=schema.PauseRequest,
        responses={
            201: OpenApiResponse(schema.PauseDetail, description="paused now"),
            200: OpenApiResponse(
                schema.PauseDetail, description="already paused: the pause as it was"
            ),
            413: schema.SUBMIT_ERRORS[413],
            **schema.COMMON_ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        body = _fields(read_json_body(request), PAUSE_FIELDS, {"scope", "name"})
        pause, created = queue_pause_ensure(
            scope=body["scope"],
            name=body["name"],
            reason="" if body.get("reason") is None else body["reason"],
            paused_by=request.user.get_username(),
        )
        return Response(pause_to_dict(pause), status=201 if created else 200)


class PauseDetailView(ControlView):
    required_permissions = {"DELETE": CHANGE_PAUSE}

    @extend_schema(
        operation_id="pauses_delete",
        summary="Resume a paused queue or job type: its waiting work is dispatched again",
        parameters=[schema.PAUSE_SCOPE, schema.PAUSE_NAME],
        responses={
            204: OpenApiResponse(description="resumed"),
            **schema.PAUSE_NOT_FOUND,
            **schema.COMMON_ERRORS,
        },
    )
    def delete(self, request: Request, scope: str, name: str) -> Response:
        if not queue_resume(scope=scope, name=name):
            raise JobNotFound(f"{scope} {name} is not paused")
        return Response(status=204)


class LimitListView(ControlView):
    any_permissions = {"GET": (VIEW_ALL_JOBS, *CHANGE_LIMIT)}

    @extend_schema(
        operation_id="limits_list",
        summary="Concurrency and rate limits per concurrency key pattern (operators: "
        "view_all_jobs or change_concurrencylimit)",
        responses={200: schema.LimitList, **schema.COMMON_ERRORS},
    )
    def get(self, request: Request) -> Response:
        no_query_parameters(request)
        return Response({"limits": [limit_to_dict(limit) for limit in concurrency_limit_list()]})


class LimitDetailView(ControlView):
    required_permissions = {"PUT": CHANGE_LIMIT, "DELETE": CHANGE_LIMIT}

    @extend_schema(
        operation_id="limits_set",
        summary="Create or replace the limit of a key pattern; the most specific (longest) "
        "matching pattern applies to a key, across all executors; per owner unless global",
        parameters=[schema.LIMIT_PATTERN],
        request=schema.LimitRequest,
        responses={
            201: OpenApiResponse(schema.LimitDetail, description="a new limit"),
            200: OpenApiResponse(schema.LimitDetail, description="the limit, replaced"),
            413: schema.SUBMIT_ERRORS[413],
            **schema.COMMON_ERRORS,
        },
    )
    def put(self, request: Request, pattern: str) -> Response:
        body = _fields(read_json_body(request), LIMIT_FIELDS)
        limit, created = concurrency_limit_set(
            pattern=pattern,
            max_running=body.get("maxRunning"),
            max_per_second=body.get("maxPerSecond"),
            is_global=body.get("global", False),
        )
        return Response(limit_to_dict(limit), status=201 if created else 200)

    @extend_schema(
        operation_id="limits_delete",
        summary="Remove the limit of a key pattern",
        parameters=[schema.LIMIT_PATTERN],
        responses={
            204: OpenApiResponse(description="removed"),
            **schema.LIMIT_NOT_FOUND,
            **schema.COMMON_ERRORS,
        },
    )
    def delete(self, request: Request, pattern: str) -> Response:
        if not concurrency_limit_delete(pattern=pattern):
            raise JobNotFound(f"no limit for pattern {pattern!r}")
        return Response(status=204)


class QueueListView(ControlView):
    @extend_schema(
        operation_id="queues_list",
        summary="Every queue with work, a live executor or settings: its jobs waiting and "
        "running (yours, or all with view_all_jobs), executors, cap, weight and pause",
        responses={200: schema.QueueList, **schema.COMMON_ERRORS},
    )
    def get(self, request: Request) -> Response:
        no_query_parameters(request)
        return Response({"queues": queue_list(user=request.user)})


class QueueDetailView(ControlView):
    required_permissions = {"PUT": CHANGE_QUEUE}

    @extend_schema(
        operation_id="queues_set",
        summary="Change a queue's cap across all executors (maxRunning) or its weight in the "
        "share of executors serving several queues; the fields given change, the others stay",
        parameters=[schema.QUEUE_NAME],
        request=schema.QueueRequest,
        responses={
            200: schema.QueueDetail,
            413: schema.SUBMIT_ERRORS[413],
            **schema.COMMON_ERRORS,
        },
    )
    def put(self, request: Request, name: str) -> Response:
        body = _fields(read_json_body(request), QUEUE_FIELDS)
        queue_settings_set(
            name=name,
            max_running=body.get("maxRunning", UNCHANGED),
            weight=body.get("weight", UNCHANGED),
        )
        return Response(queue_get(name, user=request.user))
