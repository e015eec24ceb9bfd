"""Strict validation of a job request (ARCHITECTURE §7, §8). Pure: no ORM, no request objects.

`parse_job_request` takes the decoded JSON body and returns a normalized `JobSpec`, or raises
`InvalidRequest` naming the offending field. Unknown fields are rejected at every level and
numbers must be JSON integers (no strings, no booleans, no floats).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlparse

from django.conf import settings
from django.utils import timezone

from apps.core.errors import InvalidBatch, InvalidRequest
from apps.core.jsonutil import forbidden_character
from apps.jobs.python_tasks.payload import validate_task_payload
from apps.scheduler.limits import checked_key, checked_queue_name

JOB_TYPES = ("SIMULATION", "TASK")
MAX_DURATION_MS = 600_000
MAX_ITERATIONS = 100_000_000
MAX_MESSAGE_CHARS = 1000
MAX_FLAKY_FAIL_TIMES = 1000
MAX_URL_CHARS = 2000
MAX_UTC_OFFSET = timedelta(hours=14)


@dataclass(frozen=True)
class JobSpec:
    job_type: str
    steps: list[dict]
    max_retries: int
    priority: int
    run_at: datetime | None
    timeout_seconds: int
    # TASK jobs (ARCHITECTURE §13): the validated {"task", "args", "kwargs"}, and the DEP 14
    # queue name and priority (-100..100) of a task enqueued from Python.
    task: dict | None = None
    queue_name: str = "default"
    task_priority: int | None = None
    # Unique jobs: a submission whose key matches a job in scope returns that job instead.
    unique_key: str | None = None
    unique_scope: str | None = None  # one of UNIQUE_SCOPES when unique_key is set
    unique_for_seconds: int | None = None  # the "period" scope's length
    # Per-key concurrency and rate limits (apps/scheduler/limits.py); None: no key.
    concurrency_key: str | None = None

    @property
    def instruction(self) -> dict:
        """What the Job stores and the executor runs."""
        return self.task if self.task is not None else {"steps": self.steps}

    def fingerprint(self) -> str:
        """Stable hash of what was asked for: the same request twice has the same fingerprint.
        Stored with the job and compared when a request is repeated with its idempotency key, so
        it must not change between releases (a unit test pins it)."""
        # A shallow copy: the canonical JSON below reads the nested steps as they are, and
        # dataclasses.asdict's deep copy of them was most of the cost (16 µs a job, 5 now).
        data = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        data["run_at"] = self.run_at.isoformat() if self.run_at else None
        for name, default in {
            **TASK_FIELD_DEFAULTS,
            **UNIQUE_FIELD_DEFAULTS,
            **ROUTING_FIELD_DEFAULTS,
        }.items():
            if data[name] == default:  # so a simulation job's fingerprint stays what it was
                del data[name]
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


TASK_FIELD_DEFAULTS = {"task": None, "queue_name": "default", "task_priority": None}
UNIQUE_FIELD_DEFAULTS = {"unique_key": None, "unique_scope": None, "unique_for_seconds": None}
# Fields added after fingerprints were first stored: left out of the hash at their default.
ROUTING_FIELD_DEFAULTS = {"concurrency_key": None}

# waiting: PENDING or DISPATCHED; active: waiting or RUNNING; period: submitted in the last
# uniqueForSeconds, whatever its state.
UNIQUE_SCOPES = ("waiting", "active", "period")
DEFAULT_UNIQUE_SCOPE = "active"
MAX_UNIQUE_KEY_CHARS = 255
MAX_UNIQUE_FOR_SECONDS = 366 * 86400


def _type_name(value: Any) -> str:
    return {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _int(value: Any, path: str, low: int, high: int | None = None) -> int:
    if type(value) is not int:
        raise InvalidRequest(f"{path} must be an integer, got {_type_name(value)}")
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise InvalidRequest(f"{path} must be {bounds}, got {value}")
    return value


def _str(value: Any, path: str, max_len: int, *, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise InvalidRequest(f"{path} must be a string, got {_type_name(value)}")
    if len(value) > max_len:
        raise InvalidRequest(f"{path} must be at most {max_len} characters, got {len(value)}")
    problem = forbidden_character(value)
    if problem:
        raise InvalidRequest(f"{path} contains {problem}")
    if not allow_empty and not value.strip():
        raise InvalidRequest(f"{path} must not be empty")
    return value


def _bool(value: Any, path: str) -> bool:
    if type(value) is not bool:
        raise InvalidRequest(f"{path} must be a boolean, got {_type_name(value)}")
    return value


def _object(value: Any, path: str, allowed: set[str], required: set[str]) -> dict:
    if not isinstance(value, dict):
        raise InvalidRequest(f"{path} must be an object, got {_type_name(value)}")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise InvalidRequest(f"{path} has unknown field(s): {', '.join(unknown)}")
    missing = sorted(required - set(value))
    if missing:
        raise InvalidRequest(f"{path} is missing required field(s): {', '.join(missing)}")
    return value


def _url(value: Any, path: str) -> str:
    url = _str(value, path, MAX_URL_CHARS, allow_empty=False)
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise InvalidRequest(f"{path} must be an http or https URL")
    return url


def _step(raw: Any, path: str) -> dict:
    if not isinstance(raw, dict):
        raise InvalidRequest(f"{path} must be an object, got {_type_name(raw)}")
    action = raw.get("action")
    if not isinstance(action, str) or action not in STEP_RULES:  # a dict is not even hashable
        known = ", ".join(STEP_RULES)
        raise InvalidRequest(f"{path}.action must be one of {known}, got {action!r}")
    rule = STEP_RULES[action]
    fields = {name for name in rule} | {"action"}
    required = {name for name, (_, is_required, _) in rule.items() if is_required} | {"action"}
    _object(raw, path, fields, required)
    step = {"action": action}
    for name, (check, _, default) in rule.items():
        if name in raw:
            step[name] = check(raw[name], f"{path}.{name}")
        elif default is not None:
            step[name] = default
    return step


# action -> {field: (validator, required, default)}
STEP_RULES: dict[str, dict[str, tuple]] = {
    "SLEEP": {"durationMs": (lambda v, p: _int(v, p, 0, MAX_DURATION_MS), True, None)},
    "LOG": {"message": (lambda v, p: _str(v, p, MAX_MESSAGE_CHARS), True, None)},
    "COMPUTE": {"iterations": (lambda v, p: _int(v, p, 0, MAX_ITERATIONS), True, None)},
    "HTTP_CALL": {
        "url": (_url, True, None),
        "latencyMs": (lambda v, p: _int(v, p, 0, MAX_DURATION_MS), True, None),
    },
    "FAIL": {
        "message": (lambda v, p: _str(v, p, MAX_MESSAGE_CHARS), False, "Simulated failure"),
        "retryable": (_bool, False, True),
    },
    "FLAKY": {
        "failTimes": (lambda v, p: _int(v, p, 1, MAX_FLAKY_FAIL_TIMES), True, None),
        "message": (lambda v, p: _str(v, p, MAX_MESSAGE_CHARS), False, "Simulated flaky failure"),
    },
}


def validate_steps(payload: Any) -> list[dict]:
    """Validate `payload` (`{"steps": [...]}`) and return the normalized steps."""
    _object(payload, "payload", {"steps"}, {"steps"})
    steps = payload["steps"]
    if not isinstance(steps, list):
        raise InvalidRequest(f"payload.steps must be an array, got {_type_name(steps)}")
    if not steps:
        raise InvalidRequest("payload.steps must contain at least one step")
    if len(steps) > settings.JOBWEAVER_MAX_STEPS:
        raise InvalidRequest(
            f"payload.steps has {len(steps)} steps; at most {settings.JOBWEAVER_MAX_STEPS} allowed"
        )
    validated = [_step(raw, f"payload.steps[{i}]") for i, raw in enumerate(steps)]
    simulated_ms = sum(step.get("durationMs", 0) + step.get("latencyMs", 0) for step in validated)
    limit_seconds = settings.JOBWEAVER_MAX_SIMULATED_SECONDS_PER_JOB
    if simulated_ms > limit_seconds * 1000:
        raise InvalidRequest(
            f"payload.steps simulate {simulated_ms / 1000:g} s in total; at most "
            f"{limit_seconds:g} s per job (SLEEP durationMs + HTTP_CALL latencyMs)"
        )
    return validated


def _run_at(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"runAt must be an ISO-8601 string or null, got {_type_name(value)}")
    if len(value) > 64:
        raise InvalidRequest("runAt is not an ISO-8601 date-time (too long)")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidRequest(f"runAt is not an ISO-8601 date-time: {value!r}") from None
    if parsed.tzinfo is None:
        raise InvalidRequest("runAt must carry a time zone (e.g. 2026-01-01T12:00:00Z)")
    if abs(parsed.utcoffset()) > MAX_UTC_OFFSET:  # no zone is further; PostgreSQL refuses them
        raise InvalidRequest(f"runAt has a UTC offset beyond ±14:00: {value!r}")
    horizon_days = settings.JOBWEAVER_MAX_RUN_AT_DAYS
    try:
        # Year 9999 with a negative offset (or year 1 with a positive one) is no UTC time.
        in_utc = parsed.astimezone(UTC)
        too_late = in_utc > timezone.now() + timedelta(days=horizon_days)
    except OverflowError:
        raise InvalidRequest(f"runAt is out of range: {value!r}") from None
    if too_late:
        raise InvalidRequest(f"runAt must be at most {horizon_days:g} days ahead")
    return parsed


REQUEST_FIELDS = {
    "jobType",
    "payload",
    "maxRetryCount",
    "priority",
    "runAt",
    "timeoutSeconds",
    "uniqueKey",
    "uniqueScope",
    "uniqueForSeconds",
    "queueName",
    "concurrencyKey",
}


def _unique(body: dict) -> dict:
    """The JobSpec fields of `uniqueKey`, `uniqueScope` and `uniqueForSeconds`."""
    key, scope, period = (body.get(name) for name in UNIQUE_REQUEST_FIELDS)
    if key is None:
        if scope is not None or period is not None:
            raise InvalidRequest("uniqueScope and uniqueForSeconds need a uniqueKey")
        return {}
    if not isinstance(key, str) or not 0 < len(key) <= MAX_UNIQUE_KEY_CHARS:
        raise InvalidRequest(f"uniqueKey must be a string of 1-{MAX_UNIQUE_KEY_CHARS} characters")
    if not key.isprintable():
        raise InvalidRequest("uniqueKey must be printable text")
    scope = DEFAULT_UNIQUE_SCOPE if scope is None else scope
    if scope not in UNIQUE_SCOPES:
        raise InvalidRequest(
            f"uniqueScope must be one of {', '.join(UNIQUE_SCOPES)}, got {scope!r}"
        )
    if scope == "period":
        if period is None:
            raise InvalidRequest('uniqueScope "period" needs uniqueForSeconds')
        period = _int(period, "uniqueForSeconds", 1, MAX_UNIQUE_FOR_SECONDS)
    elif period is not None:
        raise InvalidRequest('uniqueForSeconds goes with uniqueScope "period"')
    return {"unique_key": key, "unique_scope": scope, "unique_for_seconds": period}


UNIQUE_REQUEST_FIELDS = ("uniqueKey", "uniqueScope", "uniqueForSeconds")


def _routing(body: dict) -> dict:
    """The JobSpec fields of `queueName` and `concurrencyKey`."""
    fields = {}
    if body.get("queueName") is not None:
        fields["queue_name"] = checked_queue_name(body["queueName"])
    if body.get("concurrencyKey") is not None:
        fields["concurrency_key"] = checked_key(body["concurrencyKey"])
    return fields


def parse_job_request(body: Any) -> JobSpec:
    """Validate a job request body as sent to `POST /api/jobs` and normalize it."""
    _object(body, "request body", REQUEST_FIELDS, {"jobType", "payload"})
    job_type = body["jobType"]
    if job_type not in JOB_TYPES:
        raise InvalidRequest(f"jobType must be one of {', '.join(JOB_TYPES)}, got {job_type!r}")
    if job_type == "TASK":
        steps, task = [], validate_task_payload(body["payload"])
    else:
        steps, task = validate_steps(body["payload"]), None

    def optional_int(name: str, default: int, low: int, high: int) -> int:
        value = body.get(name)
        return default if value is None else _int(value, name, low, high)

    return JobSpec(
        job_type=job_type,
        steps=steps,
        task=task,
        max_retries=optional_int(
            "maxRetryCount",
            settings.JOBWEAVER_DEFAULT_MAX_RETRY_COUNT,
            0,
            settings.JOBWEAVER_MAX_RETRY_COUNT,
        ),
        priority=optional_int("priority", 5, 0, 9),
        run_at=_run_at(body.get("runAt")),
        timeout_seconds=optional_int(
            "timeoutSeconds",
            settings.JOBWEAVER_DEFAULT_TIMEOUT_SECONDS,
            1,
            settings.JOBWEAVER_MAX_TIMEOUT_SECONDS,
        ),
        **_unique(body),
        **_routing(body),
    )


def parse_batch_request(body: Any) -> list[JobSpec]:
    """Validate `{"jobs": [<job request>, ...]}` as sent to `POST /api/jobs/batch`: every item
    is checked, and InvalidBatch names each rejected one by index."""
    _object(body, "request body", {"jobs"}, {"jobs"})
    items = body["jobs"]
    if not isinstance(items, list):
        raise InvalidRequest(f"jobs must be an array, got {_type_name(items)}")
    limit = settings.JOBWEAVER_MAX_BATCH_JOBS
    if not 0 < len(items) <= limit:
        raise InvalidRequest(f"jobs must hold 1 to {limit} job requests, got {len(items)}")
    specs, errors = [], []
    for index, item in enumerate(items):
        try:
            specs.append(parse_job_request(item))
        except InvalidRequest as exc:
            errors.append({"index": index, "message": f"jobs[{index}]: {exc.message}"})
    if errors:
        raise InvalidBatch(
            f"{len(errors)} of {len(items)} jobs rejected; nothing was submitted", errors=errors
        )
    return specs
