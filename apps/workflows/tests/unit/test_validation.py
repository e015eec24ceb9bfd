"""A workflow's graph and items as `POST /api/workflows` takes them (apps/workflows/
validation.py): each bad graph is refused naming its problem. Pure: no database."""

from __future__ import annotations

import pytest

from jobweaver.core.errors import InvalidBatch, InvalidRequest
from jobweaver.workflows.validation import parse_workflow_request

LOG = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}


def body(*items, name="nightly") -> dict:
    return {
        "name": name,
        "jobs": [
            {"ref": ref, "job": LOG, **({"dependsOn": list(after)} if after else {})}
            for ref, *after in items
        ],
    }


def test_a_diamond_is_a_workflow():
    spec = parse_workflow_request(
        body(("extract",), ("left", "extract"), ("right", "extract"), ("merge", "left", "right"))
    )
    assert spec.name == "nightly"
    assert [(i.ref, i.depends_on) for i in spec.items] == [
        ("extract", ()),
        ("left", ("extract",)),
        ("right", ("extract",)),
        ("merge", ("left", "right")),
    ]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([("a", "c"), ("b", "a"), ("c", "b")], "dependencies form a cycle: "),
        ([("a",), ("b", "nope")], "ref 'b' depends on unknown ref 'nope'"),
        ([("a", "a")], "ref 'a' depends on itself"),
        ([("a",), ("a",)], "ref 'a' is used twice"),
        ([("a",), ("b", "a", "a")], "ref 'b' names a dependency twice"),
    ],
)
def test_a_bad_graph_is_refused_naming_the_problem(items, message):
    with pytest.raises(InvalidRequest) as refused:
        parse_workflow_request(body(*items))
    assert message in refused.value.message


def test_the_cycle_is_named_by_its_refs():
    with pytest.raises(InvalidRequest) as refused:
        parse_workflow_request(body(("start",), ("a", "c", "start"), ("b", "a"), ("c", "b")))
    cycle = refused.value.message.split(": ", 1)[1].split(" -> ")
    assert cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}


def test_at_most_a_thousand_jobs(settings):
    assert settings.JOBWEAVER_MAX_WORKFLOW_JOBS == 1000
    with pytest.raises(InvalidRequest, match="1 to 1000 jobs, got 1001"):
        parse_workflow_request(body(*[(f"j{n}",) for n in range(1001)]))
    with pytest.raises(InvalidRequest, match="1 to 1000 jobs, got 0"):
        parse_workflow_request(body())


def test_dependencies_per_job_are_capped(settings):
    settings.JOBWEAVER_MAX_WORKFLOW_EDGES_PER_JOB = 2
    with pytest.raises(InvalidRequest, match="ref 'd' depends on 3 jobs; at most 2"):
        parse_workflow_request(body(("a",), ("b",), ("c",), ("d", "a", "b", "c")))


def test_each_bad_job_is_named_by_index_and_ref():
    request = body(("a",), ("b", "a"))
    request["jobs"][1]["job"] = {"jobType": "SIMULATION", "payload": {"steps": []}, "x": 1}
    request["jobs"][0]["ref"] = "a b"
    with pytest.raises(InvalidBatch) as refused:
        parse_workflow_request(request)
    assert [e["index"] for e in refused.value.errors] == [0, 1]
    assert "jobs[0].ref must be 1-64 letters" in refused.value.errors[0]["message"]
    assert refused.value.errors[1]["message"].startswith("jobs[1] (ref 'b').job: ")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": ""}, "name"),
        ({"name": " padded"}, "leading or trailing"),
        ({"jobs": {}}, "jobs must be an array"),
        ({"extra": 1}, "extra"),
    ],
)
def test_the_envelope_is_checked(change, message):
    with pytest.raises(InvalidRequest, match=message):
        parse_workflow_request({**body(("a",)), **change})


def test_unique_keys_are_refused_in_a_workflow():
    request = body(("a",))
    request["jobs"][0]["job"] = {**LOG, "uniqueKey": "k"}
    with pytest.raises(InvalidBatch) as refused:
        parse_workflow_request(request)
    assert "uniqueKey is not available in a workflow" in refused.value.errors[0]["message"]
