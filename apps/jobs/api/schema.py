"""The OpenAPI description of the API (drf-spectacular): bodies, responses and errors.

The views parse and validate with apps/jobs/validation.py, not with these serializers: they only
describe the shapes for the schema at /api/schema/ and Swagger UI at /api/docs/. Each job kind
describes its payload next to its validator, from the same constants and settings (e.g. the steps
in apps/jobs/kinds/simulation.py), and the schemathesis test
(apps/jobs/tests/test_schemathesis.py) holds the live API to this description.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, PolymorphicProxySerializer
from rest_framework import serializers

from jobweaver.conf import settings
from jobweaver.core import names
from jobweaver.jobs import validation
from jobweaver.jobs.kinds import all_kinds
from jobweaver.scheduler.models import QUEUE_MAX_RUNNING_RANGE, QUEUE_WEIGHT_RANGE, ExecutionStatus
from jobweaver.scheduler.services import MAX_LIMIT_VALUE

STATUSES = ExecutionStatus.values


# --- requests ------------------------------------------------------------------------------------


# Each kind describes its own payload (apps/jobs/kinds/); the undescribed ones are left out.
DESCRIBED_KINDS = [kind for kind in all_kinds() if kind.payload_schema is not None]


def _payload() -> serializers.Serializer:
    schemas = [kind.payload_schema for kind in DESCRIBED_KINDS]
    if len(schemas) == 1:
        return schemas[0]()
    return PolymorphicProxySerializer(
        component_name="Payload", serializers=schemas, resource_type_field_name=None
    )


class JobRequest(serializers.Serializer):
    jobType = serializers.ChoiceField(choices=[kind.name for kind in DESCRIBED_KINDS])
    payload = _payload()
    maxRetryCount = serializers.IntegerField(
        min_value=0, max_value=settings.JOBWEAVER_MAX_RETRY_COUNT, required=False, allow_null=True
    )
    priority = serializers.IntegerField(
        min_value=0,
        max_value=9,
        required=False,
        allow_null=True,
        help_text="0-9, higher first; above JOBWEAVER_PRIORITY_PERMISSION_ABOVE needs the "
        "jobs.submit_high_priority permission",
    )
    runAt = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="not before this time (ISO-8601 with a zone, within JOBWEAVER_MAX_RUN_AT_DAYS)",
    )
    timeoutSeconds = serializers.IntegerField(
        min_value=1,
        max_value=settings.JOBWEAVER_MAX_TIMEOUT_SECONDS,
        required=False,
        allow_null=True,
    )
    uniqueKey = serializers.CharField(
        min_length=1,
        max_length=validation.MAX_UNIQUE_KEY_CHARS,
        required=False,
        allow_null=True,
        help_text="Unique jobs: if one of the submitter's jobs with this key is in uniqueScope, "
        "that job is returned with 200 (as an idempotency replay, whatever its request was) "
        "and nothing is created. Concurrent submits of one key create one job. In a batch, "
        "such an item gets the existing job (or the earlier item's) in its place.",
    )
    uniqueScope = serializers.ChoiceField(
        choices=list(validation.UNIQUE_SCOPES),
        required=False,
        allow_null=True,
        help_text="with uniqueKey: waiting = a PENDING or DISPATCHED job; active (default) = "
        "waiting or RUNNING; period = any job submitted in the last uniqueForSeconds",
    )
    uniqueForSeconds = serializers.IntegerField(
        min_value=1,
        max_value=validation.MAX_UNIQUE_FOR_SECONDS,
        required=False,
        allow_null=True,
        help_text='required with uniqueScope "period", refused otherwise',
    )
    queueName = serializers.RegexField(
        names.QUEUE_NAME_PATTERN.pattern,
        max_length=names.MAX_QUEUE_NAME_CHARS,
        required=False,
        allow_null=True,
        help_text='the queue (default "default"): a paused queue starts none of its jobs',
    )
    concurrencyKey = serializers.CharField(
        min_length=1,
        max_length=names.MAX_CONCURRENCY_KEY_CHARS,
        required=False,
        allow_null=True,
        help_text="Per-key limits (e.g. a customer id): the concurrency limit whose pattern "
        "matches this key caps how many of its jobs run at once and start per second, across "
        "all executors; jobs over the limit wait.",
    )


class BatchRequest(serializers.Serializer):
    jobs = serializers.ListField(
        child=JobRequest(), min_length=1, max_length=settings.JOBWEAVER_MAX_BATCH_JOBS
    )


# --- responses -----------------------------------------------------------------------------------


class JobAccepted(serializers.Serializer):
    jobId = serializers.UUIDField()
    traceId = serializers.CharField()
    status = serializers.ChoiceField(choices=STATUSES)


class BatchAccepted(serializers.Serializer):
    jobs = JobAccepted(many=True)


class Attempt(serializers.Serializer):
    eventId = serializers.UUIDField()
    attempt = serializers.IntegerField()
    workerId = serializers.CharField()
    startedAt = serializers.DateTimeField(allow_null=True)
    finishedAt = serializers.DateTimeField(allow_null=True)
    outcome = serializers.CharField()
    errorMessage = serializers.CharField(allow_null=True)
    stepsCompleted = serializers.IntegerField()
    exceptionType = serializers.CharField(
        required=False, allow_null=True, help_text="TASK jobs: the exception's class path"
    )
    traceback = serializers.CharField(
        required=False, allow_null=True, help_text="TASK jobs: operators only (§17), else null"
    )
    result = serializers.JSONField(
        required=False, allow_null=True, help_text="TASK jobs: the attempt's return value"
    )


class Progress(serializers.Serializer):
    stepsCompleted = serializers.IntegerField()
    totalSteps = serializers.IntegerField()


class TaskRetryPolicy(serializers.Serializer):
    retryOn = serializers.ListField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="exception class paths that are retried; null: every exception",
    )
    retryBackoff = serializers.ListField(
        child=serializers.FloatField(),
        allow_null=True,
        help_text="[base, cap] seconds; null: the settings'",
    )
    retryJitter = serializers.FloatField(allow_null=True)
    hardTimeoutSeconds = serializers.IntegerField(allow_null=True)


class JobDetail(serializers.Serializer):
    jobId = serializers.UUIDField()
    jobType = serializers.CharField()
    status = serializers.ChoiceField(choices=STATUSES)
    payload = serializers.JSONField()
    priority = serializers.IntegerField()
    maxRetryCount = serializers.IntegerField()
    retryCount = serializers.IntegerField()
    nextRunAt = serializers.DateTimeField(allow_null=True)
    lastError = serializers.CharField(allow_null=True)
    traceId = serializers.CharField()
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()
    startedAt = serializers.DateTimeField(allow_null=True)
    finishedAt = serializers.DateTimeField(allow_null=True)
    progress = Progress()
    attempts = Attempt(many=True)
    queueName = serializers.CharField()
    concurrencyKey = serializers.CharField(allow_null=True)
    result = serializers.JSONField(
        required=False, allow_null=True, help_text="TASK jobs: the return value once COMPLETED"
    )
    retryPolicy = TaskRetryPolicy(required=False, help_text="TASK jobs: the task's own options")
    workflowId = serializers.UUIDField(allow_null=True, help_text="its workflow (§16), or null")
    dependsOn = serializers.ListField(
        child=serializers.UUIDField(), help_text="the jobs it runs after in its workflow"
    )


class JobPage(serializers.Serializer):
    jobs = JobDetail(many=True)
    page = serializers.IntegerField()
    size = serializers.IntegerField()
    totalElements = serializers.IntegerField()
    totalPages = serializers.IntegerField()


class JobAttempts(serializers.Serializer):
    jobId = serializers.UUIDField()
    attempts = Attempt(many=True)


class StatusCounts(serializers.Serializer):
    WAITING = serializers.IntegerField()
    PENDING = serializers.IntegerField()
    DISPATCHED = serializers.IntegerField()
    RUNNING = serializers.IntegerField()
    COMPLETED = serializers.IntegerField()
    FAILED = serializers.IntegerField()
    CANCELLED = serializers.IntegerField()


class LastHour(serializers.Serializer):
    completed = serializers.IntegerField()
    deadLettered = serializers.IntegerField()
    throughputPerMinute = serializers.FloatField()
    attemptsFinished = serializers.IntegerField()
    attemptsFailed = serializers.IntegerField()
    failureRate = serializers.FloatField()


class Stats(serializers.Serializer):
    countsByStatus = StatusCounts()
    deadLetters = serializers.IntegerField()
    oldestDueJobAgeSeconds = serializers.FloatField(allow_null=True)
    lastHour = LastHour()


class ItemError(serializers.Serializer):
    index = serializers.IntegerField()
    message = serializers.CharField()


class Error(serializers.Serializer):
    """The one error body of every failure (ARCHITECTURE §8)."""

    timestamp = serializers.DateTimeField()
    status = serializers.IntegerField()
    errorCode = serializers.ChoiceField(
        choices=[
            "API.INVALID_REQUEST",
            "API.UNAUTHENTICATED",
            "API.FORBIDDEN",
            "API.JOB_NOT_FOUND",
            "API.WORKFLOW_NOT_FOUND",
            "API.INVALID_STATE_TRANSITION",
            "API.IDEMPOTENCY_CONFLICT",
            "API.PAYLOAD_TOO_LARGE",
            "API.THROTTLED",
            "API.INTERNAL_ERROR",
        ]
    )
    message = serializers.CharField()
    jobId = serializers.UUIDField(allow_null=True)
    errors = ItemError(many=True, required=False, help_text="POST /api/jobs/batch: each item")


# --- what each operation may answer ----------------------------------------------------------


def _error(description: str) -> OpenApiResponse:
    return OpenApiResponse(Error, description=description)


# Every operation may answer these: authentication, permission, throttling, wrong method or
# media type, and the last resort.
COMMON_ERRORS = {
    400: _error("API.INVALID_REQUEST: a parameter or the body is invalid"),
    401: _error("API.UNAUTHENTICATED: no or bad credentials"),
    403: _error("API.FORBIDDEN: authenticated, but a permission is missing (or CSRF failed)"),
    405: _error("API.INVALID_REQUEST: method not allowed"),
    406: _error("API.INVALID_REQUEST: only application/json is served"),
    415: _error("API.INVALID_REQUEST: unsupported media type"),
    429: _error("API.THROTTLED: too many requests; see Retry-After"),
    500: _error("API.INTERNAL_ERROR: a bug; no details are disclosed"),
}
NOT_FOUND = {404: _error("API.JOB_NOT_FOUND: no such job, or not yours")}
SUBMIT_ERRORS = {
    409: _error("API.IDEMPOTENCY_CONFLICT: the key was used with another body"),
    413: _error("API.PAYLOAD_TOO_LARGE: the body exceeds the limit"),
}
STATE_CONFLICT = {409: _error("API.INVALID_STATE_TRANSITION: the job's state does not allow it")}

TRACE_HEADER = OpenApiParameter(
    "X-Trace-Id",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="trace id to use (1-64 of letters, digits, . _ : -); generated when absent",
)
IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="same key + same body: 200 with the original job; different body: 409",
)
JOB_ID = OpenApiParameter("job_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
LIST_PARAMETERS = [
    OpenApiParameter("status", OpenApiTypes.STR, enum=STATUSES),
    OpenApiParameter("type", OpenApiTypes.STR, enum=[kind.name for kind in all_kinds()]),
    OpenApiParameter("priority", OpenApiTypes.INT, description="0-9"),
    OpenApiParameter("createdAfter", OpenApiTypes.DATETIME, description="inclusive"),
    OpenApiParameter("createdBefore", OpenApiTypes.DATETIME, description="exclusive"),
    OpenApiParameter("traceId", OpenApiTypes.STR),
    OpenApiParameter(
        "sort",
        OpenApiTypes.STR,
        enum=[
            "createdAt",
            "-createdAt",
            "updatedAt",
            "-updatedAt",
            "priority",
            "-priority",
            "nextRunAt",
            "-nextRunAt",
            "status",
            "-status",
        ],
        description="order (a leading - for descending; default -createdAt); ties by id",
    ),
    OpenApiParameter("page", OpenApiTypes.INT, description="0-based page number"),
    OpenApiParameter("size", OpenApiTypes.INT, description="1 to JOBWEAVER_API_MAX_PAGE_SIZE"),
]


# --- pauses and concurrency limits (apps/jobs/api/controls.py) ----------------------------------


class PauseRequest(serializers.Serializer):
    scope = serializers.ChoiceField(choices=["QUEUE", "JOB_TYPE"])
    name = serializers.CharField(
        max_length=names.MAX_QUEUE_NAME_CHARS,
        help_text='QUEUE: a queue name (lowercase letters, digits, "_", "-"); JOB_TYPE: '
        "SIMULATION or TASK",
    )
    reason = serializers.CharField(
        max_length=200, required=False, allow_blank=True, allow_null=True
    )


class PauseDetail(serializers.Serializer):
    scope = serializers.ChoiceField(choices=["QUEUE", "JOB_TYPE"])
    name = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)
    pausedBy = serializers.CharField(allow_blank=True, help_text="the username who paused it")
    pausedAt = serializers.DateTimeField()


class PauseList(serializers.Serializer):
    pauses = PauseDetail(many=True)


def _limit_value(help_text: str):
    return serializers.IntegerField(
        min_value=1,
        max_value=MAX_LIMIT_VALUE,
        required=False,
        allow_null=True,
        help_text=help_text,
    )


class _NamedGlobal:
    """A serializer with a field named `global` (a Python keyword): declared as `global_`."""

    def get_fields(self):
        fields = super().get_fields()
        fields["global"] = fields.pop("global_")
        return fields


LIMIT_GLOBAL_HELP = (
    "false (the default): per owner, each owner's jobs of a key count on their own; true: "
    "every owner's jobs of a key count as one key"
)


class LimitRequest(_NamedGlobal, serializers.Serializer):
    """At least one of the two bounds; a field left out or null sets no bound of that kind."""

    maxRunning = _limit_value("at most this many of one key's jobs dispatched or running")
    maxPerSecond = _limit_value("at most this many of one key's jobs sent in any one second")
    global_ = serializers.BooleanField(required=False, default=False, help_text=LIMIT_GLOBAL_HELP)


class LimitDetail(_NamedGlobal, serializers.Serializer):
    pattern = serializers.CharField()
    maxRunning = serializers.IntegerField(allow_null=True)
    maxPerSecond = serializers.IntegerField(allow_null=True)
    global_ = serializers.BooleanField(help_text=LIMIT_GLOBAL_HELP)
    updatedAt = serializers.DateTimeField()


class LimitList(serializers.Serializer):
    limits = LimitDetail(many=True)


class QueueRequest(serializers.Serializer):
    """Any of the two (the fields given change, the others stay)."""

    maxRunning = serializers.IntegerField(
        min_value=QUEUE_MAX_RUNNING_RANGE[0],
        max_value=QUEUE_MAX_RUNNING_RANGE[1],
        required=False,
        allow_null=True,
        help_text="at most this many of the queue's jobs dispatched or running across all "
        "executors; null: no cap (0 is refused: pause the queue instead)",
    )
    weight = serializers.IntegerField(
        min_value=QUEUE_WEIGHT_RANGE[0],
        max_value=QUEUE_WEIGHT_RANGE[1],
        required=False,
        help_text="its share of the credits of executors that serve it and other queues with "
        "work waiting, in proportion to theirs",
    )


class QueueDetail(serializers.Serializer):
    name = serializers.CharField()
    waiting = serializers.IntegerField(help_text="jobs PENDING (yours, or all with view_all_jobs)")
    running = serializers.IntegerField(help_text="jobs dispatched or running")
    executors = serializers.IntegerField(help_text="live executors serving the queue")
    maxRunning = serializers.IntegerField(allow_null=True)
    weight = serializers.IntegerField()
    paused = serializers.BooleanField()


class QueueList(serializers.Serializer):
    queues = QueueDetail(many=True)


QUEUE_NAME = OpenApiParameter(
    "name", OpenApiTypes.STR, OpenApiParameter.PATH, description="the queue's name"
)
PAUSE_SCOPE = OpenApiParameter(
    "scope", OpenApiTypes.STR, OpenApiParameter.PATH, enum=["QUEUE", "JOB_TYPE"]
)
PAUSE_NAME = OpenApiParameter(
    "name", OpenApiTypes.STR, OpenApiParameter.PATH, description="the queue or job type"
)
LIMIT_PATTERN = OpenApiParameter(
    "pattern",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description="the key pattern, URL-encoded where needed; `*` matches any run of characters",
)
PAUSE_NOT_FOUND = {
    404: _error("API.JOB_NOT_FOUND (the API's one not-found code): that is not paused")
}
LIMIT_NOT_FOUND = {404: _error("API.JOB_NOT_FOUND (the API's one not-found code): no such limit")}
