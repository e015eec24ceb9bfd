"""/api/workflows (ARCHITECTURE §16) against the real database, no workers: create all or
nothing, read, list, cancel; bad graphs are 400s naming the problem with nothing stored; the
job permissions and owner scoping gate every operation; the job detail names its workflow."""

from __future__ import annotations

import json

import pytest

from jobweaver.jobs.tests.api_helpers import api_client, assert_error_body, counts
from jobweaver.workflows.models import Dependency, Node, Workflow

pytestmark = pytest.mark.django_db

LOG = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
DIAMOND = {
    "name": "nightly-report",
    "jobs": [
        {"ref": "extract", "job": LOG},
        {"ref": "left", "dependsOn": ["extract"], "job": LOG},
        {"ref": "right", "dependsOn": ["extract"], "job": LOG},
        {"ref": "merge", "dependsOn": ["left", "right"], "job": LOG},
    ],
}


def post(client, path: str, body) -> object:
    return client.post(path, json.dumps(body), content_type="application/json")


def stored() -> tuple:
    return (*counts(), Workflow.objects.count(), Node.objects.count(), Dependency.objects.count())


def test_a_diamond_is_accepted_whole_and_reads_back_with_its_dependencies():
    client = api_client("alice")

    response = post(client, "/api/workflows", DIAMOND)

    assert response.status_code == 202, response.content
    accepted = response.json()
    assert (accepted["name"], accepted["status"]) == ("nightly-report", "RUNNING")
    assert [(j["ref"], j["status"]) for j in accepted["jobs"]] == [
        ("extract", "PENDING"),
        ("left", "WAITING"),
        ("right", "WAITING"),
        ("merge", "WAITING"),
    ]
    assert response["Location"] == f"/api/workflows/{accepted['workflowId']}"
    detail = client.get(response["Location"]).json()
    assert detail["workflowId"] == accepted["workflowId"]
    assert (detail["unfinishedJobs"], detail["failedJobs"], detail["finishedAt"]) == (4, 0, None)
    assert [(j["ref"], j["dependsOn"]) for j in detail["jobs"]] == [
        ("extract", []),
        ("left", ["extract"]),
        ("right", ["extract"]),
        ("merge", ["left", "right"]),
    ]
    ids = {j["ref"]: j["jobId"] for j in accepted["jobs"]}
    merge = client.get(f"/api/jobs/{ids['merge']}").json()
    assert merge["workflowId"] == accepted["workflowId"]
    assert merge["dependsOn"] == [ids["left"], ids["right"]]
    assert merge["status"] == "WAITING"
    plain = post(client, "/api/jobs", LOG).json()["jobId"]
    plain_detail = client.get(f"/api/jobs/{plain}").json()
    assert (plain_detail["workflowId"], plain_detail["dependsOn"]) == (None, [])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"jobs": [{"ref": "a", "dependsOn": ["b"], "job": LOG},
                   {"ref": "b", "dependsOn": ["a"], "job": LOG}]}, "cycle"),
        ({"jobs": [{"ref": "a", "dependsOn": ["ghost"], "job": LOG}]}, "unknown ref 'ghost'"),
        ({"jobs": [{"ref": "a", "dependsOn": ["a"], "job": LOG}]}, "depends on itself"),
        ({"jobs": [{"ref": "a", "job": LOG}, {"ref": "a", "job": LOG}]}, "'a' is used twice"),
        ({"jobs": [{"ref": f"j{n}", "job": LOG} for n in range(1001)]}, "1 to 1000 jobs"),
        ({"jobs": [{"ref": "a", "job": {**LOG, "priority": 42}}]}, "jobs[0] (ref 'a').job: "),
    ],
)  # fmt: skip
def test_a_bad_workflow_is_a_400_naming_the_problem_and_stores_nothing(change, message):
    client = api_client("bob")
    before = stored()

    response = post(client, "/api/workflows", {**DIAMOND, **change})

    body = assert_error_body(response, 400, "API.INVALID_REQUEST")
    named = body["message"] + " ".join(e["message"] for e in body.get("errors", []))
    assert message in named
    assert stored() == before


def test_another_owner_s_workflow_is_a_404_and_operators_see_all():
    owner = api_client("carol")
    workflow_id = post(owner, "/api/workflows", DIAMOND).json()["workflowId"]
    stranger = api_client("dave")

    assert_error_body(stranger.get(f"/api/workflows/{workflow_id}"), 404, "API.WORKFLOW_NOT_FOUND")
    assert_error_body(
        stranger.post(f"/api/workflows/{workflow_id}/cancel"), 404, "API.WORKFLOW_NOT_FOUND"
    )
    assert stranger.get("/api/workflows").json()["totalElements"] == 0
    operator = api_client("erin", "jobweaver_jobs.view_job", "jobweaver_jobs.view_all_jobs")
    assert operator.get(f"/api/workflows/{workflow_id}").status_code == 200
    assert_error_body(stranger.get("/api/workflows/not-a-uuid"), 404, "API.WORKFLOW_NOT_FOUND")


def test_the_job_permissions_gate_workflows():
    reader = api_client("frank", "jobweaver_jobs.view_job")
    assert_error_body(post(reader, "/api/workflows", DIAMOND), 403, "API.FORBIDDEN")
    nobody = api_client("gina", "jobweaver_jobs.add_job")
    assert_error_body(nobody.get("/api/workflows"), 403, "API.FORBIDDEN")


def test_cancel_stops_every_unfinished_job_and_a_finished_workflow_is_a_409():
    client = api_client("hank")
    workflow_id = post(client, "/api/workflows", DIAMOND).json()["workflowId"]

    response = client.post(f"/api/workflows/{workflow_id}/cancel")

    assert response.status_code == 200, response.content
    cancelled = response.json()
    assert cancelled["status"] == "CANCELLED"
    assert {j["status"] for j in cancelled["jobs"]} == {"CANCELLED"}
    assert_error_body(
        client.post(f"/api/workflows/{workflow_id}/cancel"), 409, "API.INVALID_STATE_TRANSITION"
    )


def test_the_list_pages_and_filters_by_status():
    client = api_client("ivy")
    ids = [post(client, "/api/workflows", {**DIAMOND, "name": f"w{n}"}).json() for n in range(3)]
    client.post(f"/api/workflows/{ids[0]['workflowId']}/cancel")

    page = client.get("/api/workflows?size=2").json()
    assert (page["totalElements"], page["totalPages"], len(page["workflows"])) == (3, 2, 2)
    cancelled = client.get("/api/workflows?status=CANCELLED").json()["workflows"]
    assert [w["name"] for w in cancelled] == ["w0"]
    assert_error_body(client.get("/api/workflows?status=DONE"), 400, "API.INVALID_REQUEST")
    assert_error_body(client.get("/api/workflows?sort=name"), 400, "API.INVALID_REQUEST")
