"""Strict validation of a job request (ARCHITECTURE §7, §8). Pure: no ORM, no request objects.

`parse_job_request` takes the decoded JSON body and returns a normalized `JobSpec`, or raises
`InvalidRequest` naming the offending field. Unknown fields are rejected at every level and
numbers must be JSON integers (no strings, no booleans, no floats). The payload is checked by
its job kind (apps/jobs/kinds/), the fields every job has are checked here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from jobweaver.conf import settings
from jobweaver.core.errors import InvalidBatch, InvalidRequest
from jobweaver.core.names import checked_key, checked_queue_name
from jobweaver.jobs.checks import checked_int, checked_object, type_name
from jobweaver.jobs.kinds import KINDS, kind_named

JOB_TYPES = tuple(KINDS)
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
    # Per-key concurrency and rate limits (apps/engine/claim/rules.py); None: no key.
    concurrency_key: str | None = None
    # A TASK's own retry policy and hard timeout (ARCHITECTURE §13a); None: the settings'.
    retry_on: tuple[str, ...] | None = None
    retry_backoff: tuple[float, float] | None = None
    retry_jitter: float | None = None
    hard_timeout_seconds: int | None = None

    @property
    def instruction(self) -> dict:
        """What the Job stores and the executor runs."""
        return self.task if self.task is not None else {"steps": self.steps}

    def fingerprint(self) -> str:
        """Stable hash of what was asked for: the same request twice has the same fingerprint.
        Stored with the job and compared when a request is repeated with its idempotency key, so
        it must not change between releases (a unit test pins it)."""
        # A shallow copy: the canonical JSON below reads the nested steps as they are;
        # dataclasses.asdict's deep copy of them was most of the cost (bench/NOTES.md).
        data = {name: getattr(self, name) for name in _SPEC_FIELD_NAMES}
        data["run_at"] = self.run_at.isoformat() if self.run_at else None
        for name, default in {
            **TASK_FIELD_DEFAULTS,
            **UNIQUE_FIELD_DEFAULTS,
            **ROUTING_FIELD_DEFAULTS,
            **TASK_OPTION_DEFAULTS,
        }.items():
            if data[name] == default:  # so a simulation job's fingerprint stays what it was
                del data[name]
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


# JobSpec's field names, read once: dataclasses.fields() per fingerprint was a fifth of its cost.
_SPEC_FIELD_NAMES = tuple(field.name for field in dataclasses.fields(JobSpec))
TASK_FIELD_DEFAULTS = {"task": None, "queue_name": "default", "task_priority": None}
UNIQUE_FIELD_DEFAULTS = {"unique_key": None, "unique_scope": None, "unique_for_seconds": None}
# Fields added after fingerprints were first stored: left out of the hash at their default.
ROUTING_FIELD_DEFAULTS = {"concurrency_key": None}
TASK_OPTION_DEFAULTS = {
    "retry_on": None,
    "retry_backoff": None,
    "retry_jitter": None,
    "hard_timeout_seconds": None,
}

# waiting: PENDING or DISPATCHED; active: waiting or RUNNING; period: submitted in the last
# uniqueForSeconds, whatever its state.
UNIQUE_SCOPES = ("waiting", "active", "period")
DEFAULT_UNIQUE_SCOPE = "active"
MAX_UNIQUE_KEY_CHARS = 255
MAX_UNIQUE_FOR_SECONDS = 366 * 86400


def _run_at(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequest(f"runAt must be an ISO-8601 string or null, got {type_name(value)}")
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
        period = checked_int(period, "uniqueForSeconds", 1, MAX_UNIQUE_FOR_SECONDS)
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
    checked_object(body, "request body", REQUEST_FIELDS, {"jobType", "payload"})
    job_type = body["jobType"]
    if job_type not in JOB_TYPES:
        raise InvalidRequest(f"jobType must be one of {', '.join(JOB_TYPES)}, got {job_type!r}")
    payload_fields = kind_named(job_type).parse_payload(body["payload"])

    def optional_int(name: str, default: int, low: int, high: int) -> int:
        value = body.get(name)
        return default if value is None else checked_int(value, name, low, high)

    return JobSpec(
        job_type=job_type,
        **payload_fields,
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
            kind_named(job_type).max_timeout_seconds(),
        ),
        **_unique(body),
        **_routing(body),
    )


def parse_batch_request(body: Any) -> list[JobSpec]:
    """Validate `{"jobs": [<job request>, ...]}` as sent to `POST /api/jobs/batch`: every item
    is checked, and InvalidBatch names each rejected one by index."""
    checked_object(body, "request body", {"jobs"}, {"jobs"})
    items = body["jobs"]
    if not isinstance(items, list):
        raise InvalidRequest(f"jobs must be an array, got {type_name(items)}")
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
