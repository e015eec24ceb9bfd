"""Strict validation of a schedule's definition, for the services (and so for the API, the CLI
and the admin alike). No ORM. Every error is an InvalidRequest naming the field."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from jobweaver.core.errors import InvalidRequest
from jobweaver.jobs.validation import JobSpec, parse_job_request
from jobweaver.schedules import slots

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")
# camelCase field of the API -> keyword of the services.
FIELDS = {
    "name": "name",
    "cron": "cron_expression",
    "timeZone": "time_zone",
    "intervalSeconds": "interval_seconds",
    "template": "job_template",
    "misfirePolicy": "misfire_policy",
    "enabled": "enabled",
}
REQUIRED_ON_CREATE = {"name", "template"}
DEFAULT_TIME_ZONE = "UTC"


@dataclass(frozen=True)
class RuleFields:
    """The stored form of a rule: exactly one of cron (with its zone) or an interval."""

    cron_expression: str | None
    time_zone: str
    interval_seconds: int | None

    @property
    def rule(self) -> slots.Rule:
        if self.interval_seconds is not None:
            return slots.IntervalRule(self.interval_seconds)
        return slots.CronRule(self.cron_expression, self.time_zone)


def clean_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidRequest(
            "name must be 1-100 letters, digits, - or _, starting with a letter or digit"
        )
    return name


def clean_rule(*, cron_expression: Any, time_zone: Any, interval_seconds: Any) -> RuleFields:
    """Exactly one of `cron_expression` (with `time_zone`, default UTC) or `interval_seconds`."""
    if (cron_expression is None) == (interval_seconds is None):
        raise InvalidRequest("give exactly one of cron (with timeZone) or intervalSeconds")
    if interval_seconds is not None and time_zone is not None:
        raise InvalidRequest("timeZone goes with cron, not with intervalSeconds")
    time_zone = DEFAULT_TIME_ZONE if time_zone is None else time_zone
    try:
        if interval_seconds is not None:
            slots.IntervalRule(interval_seconds)
        else:
            slots.CronRule(cron_expression, time_zone)
    except slots.InvalidRule as exc:
        raise InvalidRequest(str(exc)) from None
    if interval_seconds is not None:
        return RuleFields(None, DEFAULT_TIME_ZONE, interval_seconds)
    return RuleFields(" ".join(cron_expression.split()), time_zone, None)


def clean_job_template(template: Any) -> JobSpec:
    """The template is a job request as POST /api/jobs takes it, less `runAt`: the schedule
    says when."""
    if isinstance(template, dict) and "runAt" in template:
        raise InvalidRequest("template.runAt is not allowed: the schedule decides when jobs run")
    try:
        return parse_job_request(template)
    except InvalidRequest as exc:
        raise InvalidRequest(f"template: {exc.message}") from None


def clean_misfire_policy(policy: Any) -> str:
    if policy not in slots.MISFIRE_POLICIES:
        raise InvalidRequest(
            f"misfirePolicy must be one of {', '.join(slots.MISFIRE_POLICIES)}, got {policy!r}"
        )
    return policy


def clean_enabled(enabled: Any) -> bool:
    if type(enabled) is not bool:
        raise InvalidRequest("enabled must be a boolean")
    return enabled


def parse_schedule_request(body: Any, *, partial: bool) -> dict[str, Any]:
    """A decoded API body → the services' keywords. Unknown fields are refused; on create
    (`partial=False`) name and template are required; on a patch the name is in the URL. The
    values themselves are checked by the services."""
    if not isinstance(body, dict):
        raise InvalidRequest("request body must be an object")
    allowed = set(FIELDS) - ({"name"} if partial else set())
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidRequest(f"request body has unknown field(s): {', '.join(unknown)}")
    if not partial:
        missing = sorted(REQUIRED_ON_CREATE - set(body))
        if missing:
            raise InvalidRequest(f"request body is missing required field(s): {', '.join(missing)}")
    elif not body:
        raise InvalidRequest("request body must change at least one field")
    for name in ("enabled", "misfirePolicy", "template"):
        if name in body and body[name] is None:
            raise InvalidRequest(f"{name} must not be null")
    return {FIELDS[name]: value for name, value in body.items()}
