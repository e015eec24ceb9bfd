"""The OpenAPI description of /api/schedules (drf-spectacular). Like the jobs API's, these
serializers only describe shapes: the views validate through the services."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from jobweaver.jobs.api import schema as jobs_schema
from jobweaver.schedules import slots

MISFIRE_HELP = (
    "after downtime, slots more than JOBWEAVER_SCHEDULES_MISFIRE_GRACE_SECONDS late are missed: "
    "SKIP submits none of them, CATCH_UP_ONCE one job for the latest; default SKIP"
)


class ScheduleTemplate(jobs_schema.JobRequest):
    """A job request as POST /api/jobs takes it, without runAt (the schedule says when)."""

    runAt = None  # removes the inherited field


class ScheduleChange(serializers.Serializer):
    cron = serializers.CharField(
        max_length=slots.MAX_CRON_CHARS,
        required=False,
        help_text="5-field cron (minute hour day-of-month month day-of-week), evaluated in "
        "timeZone; exactly one of cron or intervalSeconds",
    )
    timeZone = serializers.CharField(
        max_length=64, required=False, help_text="IANA name, with cron only; default UTC"
    )
    intervalSeconds = serializers.IntegerField(
        min_value=1,
        max_value=slots.MAX_INTERVAL_SECONDS,
        required=False,
        help_text="at least JOBWEAVER_MIN_SCHEDULE_INTERVAL_SECONDS (60); exactly one of cron or "
        "intervalSeconds",
    )
    template = ScheduleTemplate(required=False)
    misfirePolicy = serializers.ChoiceField(
        choices=list(slots.MISFIRE_POLICIES), required=False, help_text=MISFIRE_HELP
    )
    enabled = serializers.BooleanField(
        required=False, help_text="false pauses; true resumes at the first slot after now"
    )


class ScheduleRequest(ScheduleChange):
    name = serializers.RegexField(
        r"^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$",
        help_text="unique among your schedules: letters, digits, - and _",
    )
    template = ScheduleTemplate()


class ScheduleDetail(serializers.Serializer):
    name = serializers.CharField()
    owner = serializers.CharField(
        allow_null=True,
        help_text="the user its jobs are submitted as: whoever created it or last changed what "
        "it submits; null: made from the command line or declared in code",
    )
    cron = serializers.CharField(allow_null=True)
    timeZone = serializers.CharField(allow_null=True)
    intervalSeconds = serializers.IntegerField(allow_null=True)
    template = serializers.JSONField(help_text="the job request each slot submits")
    misfirePolicy = serializers.ChoiceField(choices=list(slots.MISFIRE_POLICIES))
    enabled = serializers.BooleanField()
    source = serializers.ChoiceField(
        choices=["api", "code"],
        help_text="code: declared with @periodic, read-only here (changes answer 409)",
    )
    nextRunAt = serializers.DateTimeField(
        allow_null=True, help_text="the next slot (UTC); null while paused"
    )
    lastSlotAt = serializers.DateTimeField(allow_null=True)
    lastJobId = serializers.UUIDField(allow_null=True)
    lastError = serializers.CharField(allow_null=True)
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class ScheduleList(serializers.Serializer):
    schedules = ScheduleDetail(many=True)


NAME = OpenApiParameter("name", OpenApiTypes.STR, OpenApiParameter.PATH)
OWNER = OpenApiParameter(
    "owner",
    OpenApiTypes.STR,
    OpenApiParameter.QUERY,
    description="the username of the schedule's owner, for operators (jobs.view_all_jobs to "
    "see, jobs.operate_all_jobs to act); default: your own, then (operators) the shared "
    "schedules of the command line and code",
)
OWNER_FILTER = OpenApiParameter(
    "owner",
    OpenApiTypes.STR,
    OpenApiParameter.QUERY,
    description="only this user's schedules (operators see everyone's)",
)
NOT_FOUND = {
    404: OpenApiResponse(
        jobs_schema.Error,
        description="API.JOB_NOT_FOUND (the API's one not-found code): no such schedule, or "
        "not one you may see",
    )
}
CODE_SCHEDULE = {
    409: OpenApiResponse(
        jobs_schema.Error,
        description="API.INVALID_STATE_TRANSITION: the schedule is declared in code (@periodic)",
    )
}
COMMON_ERRORS = jobs_schema.COMMON_ERRORS
PAYLOAD_TOO_LARGE = {413: jobs_schema.SUBMIT_ERRORS[413]}
LOCATION = OpenApiParameter("Location", OpenApiTypes.STR, OpenApiParameter.HEADER, response=[201])
