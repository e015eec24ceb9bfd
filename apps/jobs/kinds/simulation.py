"""SIMULATION: a list of simulated steps (ARCHITECTURE §7), validated strictly here and run by
the executor's steps (apps/executor/steps.py)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlparse

from django import forms
from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers

from jobweaver.conf import settings
from jobweaver.core.errors import InvalidRequest
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.checks import checked_bool, checked_int, checked_object, checked_str, type_name
from jobweaver.jobs.kinds.base import JobKind, ReadJson
from jobweaver.jobs.models import Job, JobType

MAX_DURATION_MS = 600_000
MAX_ITERATIONS = 100_000_000
MAX_MESSAGE_CHARS = 1000
MAX_FLAKY_FAIL_TIMES = 1000
MAX_URL_CHARS = 2000

EXAMPLE_STEPS = json.dumps(
    [{"action": "LOG", "message": "hello"}, {"action": "SLEEP", "durationMs": 500}], indent=2
)


# --- validation ----------------------------------------------------------------------------------


def _url(value: Any, path: str) -> str:
    url = checked_str(value, path, MAX_URL_CHARS, allow_empty=False)
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise InvalidRequest(f"{path} must be an http or https URL")
    return url


def _step(raw: Any, path: str) -> dict:
    if not isinstance(raw, dict):
        raise InvalidRequest(f"{path} must be an object, got {type_name(raw)}")
    action = raw.get("action")
    if not isinstance(action, str) or action not in STEP_RULES:  # a dict is not even hashable
        known = ", ".join(STEP_RULES)
        raise InvalidRequest(f"{path}.action must be one of {known}, got {action!r}")
    rule = STEP_RULES[action]
    fields = {name for name in rule} | {"action"}
    required = {name for name, (_, is_required, _) in rule.items() if is_required} | {"action"}
    checked_object(raw, path, fields, required)
    step = {"action": action}
    for name, (check, _, default) in rule.items():
        if name in raw:
            step[name] = check(raw[name], f"{path}.{name}")
        elif default is not None:
            step[name] = default
    return step


# action -> {field: (validator, required, default)}
STEP_RULES: dict[str, dict[str, tuple]] = {
    "SLEEP": {"durationMs": (lambda v, p: checked_int(v, p, 0, MAX_DURATION_MS), True, None)},
    "LOG": {"message": (lambda v, p: checked_str(v, p, MAX_MESSAGE_CHARS), True, None)},
    "COMPUTE": {"iterations": (lambda v, p: checked_int(v, p, 0, MAX_ITERATIONS), True, None)},
    "HTTP_CALL": {
        "url": (_url, True, None),
        "latencyMs": (lambda v, p: checked_int(v, p, 0, MAX_DURATION_MS), True, None),
    },
    "FAIL": {
        "message": (
            lambda v, p: checked_str(v, p, MAX_MESSAGE_CHARS),
            False,
            "Simulated failure",
        ),
        "retryable": (checked_bool, False, True),
    },
    "FLAKY": {
        "failTimes": (lambda v, p: checked_int(v, p, 1, MAX_FLAKY_FAIL_TIMES), True, None),
        "message": (
            lambda v, p: checked_str(v, p, MAX_MESSAGE_CHARS),
            False,
            "Simulated flaky failure",
        ),
    },
}


def validate_steps(payload: Any) -> list[dict]:
    """Validate `payload` (`{"steps": [...]}`) and return the normalized steps."""
    checked_object(payload, "payload", {"steps"}, {"steps"})
    steps = payload["steps"]
    if not isinstance(steps, list):
        raise InvalidRequest(f"payload.steps must be an array, got {type_name(steps)}")
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
    # Per job, not per step: a hundred COMPUTE steps at the step's cap held a slot for hours.
    iterations = sum(step.get("iterations", 0) for step in validated)
    limit_iterations = settings.JOBWEAVER_MAX_COMPUTE_ITERATIONS_PER_JOB
    if iterations > limit_iterations:
        raise InvalidRequest(
            f"payload.steps compute {iterations} iterations in total; at most "
            f"{limit_iterations} per job (COMPUTE iterations)"
        )
    return validated


# --- OpenAPI -------------------------------------------------------------------------------------


def _step_schema(action: str, **fields) -> type[serializers.Serializer]:
    attrs = {"action": serializers.ChoiceField(choices=[action])} | fields
    step = type(f"{action.title().replace('_', '')}Step", (serializers.Serializer,), attrs)
    step.action = action  # the discriminator's value (the field itself lives in _declared_fields)
    return step


def _duration(**kwargs):
    return serializers.IntegerField(min_value=0, max_value=MAX_DURATION_MS, **kwargs)


def _message(**kwargs):
    return serializers.CharField(max_length=MAX_MESSAGE_CHARS, **kwargs)


STEP_SCHEMAS = [
    _step_schema("SLEEP", durationMs=_duration()),
    _step_schema("LOG", message=_message(allow_blank=True)),
    _step_schema(
        "COMPUTE", iterations=serializers.IntegerField(min_value=0, max_value=MAX_ITERATIONS)
    ),
    _step_schema(
        "HTTP_CALL",
        url=serializers.URLField(max_length=MAX_URL_CHARS),
        latencyMs=_duration(),
    ),
    _step_schema(
        "FAIL", message=_message(required=False), retryable=serializers.BooleanField(required=False)
    ),
    _step_schema(
        "FLAKY",
        failTimes=serializers.IntegerField(min_value=1, max_value=MAX_FLAKY_FAIL_TIMES),
        message=_message(required=False),
    ),
]

Step = PolymorphicProxySerializer(
    component_name="Step",
    # action -> its step's serializer: the discriminator's mapping.
    serializers={schema.action: schema for schema in STEP_SCHEMAS},
    resource_type_field_name="action",
    many=False,
)


class SimulationPayload(serializers.Serializer):
    steps = serializers.ListField(child=Step, min_length=1, max_length=settings.JOBWEAVER_MAX_STEPS)


# --- the kind ------------------------------------------------------------------------------------


class SimulationKind(JobKind):
    name = JobType.SIMULATION.value
    form_label = "Simulation steps"
    payload_schema = SimulationPayload

    def parse_payload(self, payload: Any) -> dict:
        return {"steps": validate_steps(payload)}

    def total_steps(self, job: Job, latest: ExecutionAttempt | None) -> int:
        return len(job.steps)

    def admin_payload(self, job: Job) -> Any:
        return job.steps

    def form_fields(self) -> dict[str, forms.Field]:
        return {
            "steps": forms.CharField(
                required=False,
                widget=forms.Textarea(attrs={"rows": 8, "cols": 70, "class": "jw-mono"}),
                initial=EXAMPLE_STEPS,
                help_text='SIMULATION: a JSON list of steps, or {"steps": [...]} '
                "(ARCHITECTURE §7).",
            )
        }

    def form_payload(self, data: dict, read_json: ReadJson) -> Any:
        steps = read_json(data["steps"] or "[]", "steps")
        return steps if isinstance(steps, dict) else {"steps": steps}


SIMULATION = SimulationKind()
