"""Validation of a TASK payload (apps/jobs/python_tasks/payload.py) and the job request
around it."""

from __future__ import annotations

import hashlib
import json
import sys

import pytest

from jobweaver.core.errors import InvalidRequest
from jobweaver.jobs.python_tasks.payload import json_only, validate_task_payload
from jobweaver.jobs.python_tasks.priority import from_jobweaver, to_jobweaver
from jobweaver.jobs.validation import parse_job_request

ADD = "jobweaver_site.examples.tasks.add"


def test_a_valid_payload_is_normalized():
    assert validate_task_payload({"task": ADD, "args": [2], "kwargs": {"b": 3}}) == {
        "task": ADD,
        "args": [2],
        "kwargs": {"b": 3},
    }
    assert validate_task_payload({"task": "jobweaver_site.examples.tasks.sleep", "args": [1]}) == {
        "task": "jobweaver_site.examples.tasks.sleep",
        "args": [1],
        "kwargs": {},
    }


def test_a_task_job_request_is_parsed_into_a_spec():
    spec = parse_job_request(
        {"jobType": "TASK", "payload": {"task": ADD, "args": [2, 3]}, "priority": 7}
    )

    assert (spec.job_type, spec.steps, spec.priority) == ("TASK", [], 7)
    assert spec.instruction == {"task": ADD, "args": [2, 3], "kwargs": {}}


def test_simulation_fingerprints_are_unchanged_by_the_task_fields():
    spec = parse_job_request(
        {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
    )
    # The canonical form of a JobSpec before TASK jobs existed: idempotent replays of requests
    # stored then still match their fingerprint.
    before = {
        "job_type": "SIMULATION",
        "steps": [{"action": "LOG", "message": "x"}],
        "max_retries": spec.max_retries,
        "priority": spec.priority,
        "run_at": None,
        "timeout_seconds": spec.timeout_seconds,
    }
    canonical = json.dumps(before, sort_keys=True, separators=(",", ":"))
    assert spec.fingerprint() == hashlib.sha256(canonical.encode()).hexdigest()


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ([], "payload must be an object, got array"),
        ({"args": []}, "missing required field(s): task"),
        ({"task": ADD, "args": [1, 2], "extra": 1}, "unknown field(s): extra"),
        ({"task": 5}, "payload.task must be a string, got integer"),
        ({"task": "add"}, "dotted path of a registered task"),
        ({"task": "os.system", "args": ["id"]}, "'os.system' is not a registered task"),
        (
            {"task": "jobweaver_site.examples.tasks.nope"},
            "'jobweaver_site.examples.tasks.nope' is not a registered",
        ),
        ({"task": ADD, "args": {"a": 1}}, "payload.args must be an array, got object"),
        ({"task": ADD, "args": [1, 2], "kwargs": []}, "payload.kwargs must be an object"),
        ({"task": ADD, "args": [1]}, "do not fit add(a, b): missing a required argument: 'b'"),
        ({"task": ADD, "args": [1, 2], "kwargs": {"c": 1}}, "unexpected keyword argument 'c'"),
        (
            {"task": "jobweaver_site.examples.tasks.sleep", "kwargs": {"context": 1, "seconds": 1}},
            "must not set 'context'",
        ),
        ({"task": ADD, "args": [1, float("inf")]}, "payload.args[1] must be a finite number"),
    ],
)
def test_invalid_payloads_are_refused_with_one_line(payload, message):
    with pytest.raises(InvalidRequest) as refused:
        validate_task_payload(payload)
    assert message in refused.value.message
    assert "\n" not in refused.value.message


def test_a_client_supplied_path_is_never_imported():
    path = "jobweaver.jobs.tests.unit.never_imported.boom"
    assert "jobweaver.jobs.tests.unit.never_imported" not in sys.modules

    with pytest.raises(InvalidRequest, match="is not a registered task"):
        parse_job_request({"jobType": "TASK", "payload": {"task": path}})

    assert "jobweaver.jobs.tests.unit.never_imported" not in sys.modules


def test_the_payload_size_is_capped(settings):
    settings.JOBWEAVER_TASK_MAX_PAYLOAD_BYTES = 90
    validate_task_payload(
        {"task": "jobweaver_site.examples.tasks.always_fails", "args": ["x" * 10]}
    )
    with pytest.raises(InvalidRequest, match=r"payload is \d+ bytes as JSON; at most 90"):
        validate_task_payload(
            {"task": "jobweaver_site.examples.tasks.always_fails", "args": ["x" * 50]}
        )


def test_json_only_keeps_json_and_turns_tuples_into_arrays():
    assert json_only({"a": (1, [2.5, None, True, "s"])}, "x") == {"a": [1, [2.5, None, True, "s"]]}
    with pytest.raises(InvalidRequest, match=r"x.k must be JSON .* got bytes"):
        json_only({"k": b"raw"}, "x")
    with pytest.raises(InvalidRequest, match="x keys must be strings, got integer"):
        json_only({1: 2}, "x")
    deep: list = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(InvalidRequest, match="nested more than 64 levels"):
        json_only(deep, "x")


def test_priorities_map_default_onto_default_and_ends_onto_ends():
    assert [to_jobweaver(p) for p in (-100, -1, 0, 1, 100)] == [0, 5, 5, 5, 9]
    mapped = [to_jobweaver(p) for p in range(-100, 101)]
    assert mapped == sorted(mapped)  # monotonic
    assert all(to_jobweaver(from_jobweaver(p)) == p for p in range(10))
    with pytest.raises(ValueError, match="between -100 and 100"):
        to_jobweaver(101)
