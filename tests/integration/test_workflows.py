"""Workflows on real executors, real Kafka, real PostgreSQL (ARCHITECTURE §16): each job starts
only after its dependencies finished, a fan-in fires exactly once under many executors and a
SIGKILL, a failure cancels its dependents and a retry brings them back, a cancel stops a
running workflow, results flow by Celery's rules. The invariants, workflow_order and
workflow_counts included, are checked after each. Without workers: apps/workflows/tests/."""

from __future__ import annotations

import json
import signal
import time
import uuid

import pytest
from django.utils import timezone

from jobweaver.core.kafka import WORKFLOW_FINISHED
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.scheduler.models import JobExecution
from jobweaver.workflows import Workflow, chain, chord, group
from jobweaver.workflows.models import Workflow as WorkflowRow
from jobweaver.workflows.services import workflow_submit
from jobweaver.workflows.validation import parse_workflow_request
from jobweaver_site.examples.tasks import add, sum_list, sum_parents
from tests.integration.helpers import (
    assert_invariants,
    live_executors,
    read_event,
    token_client,
    worker_pid,
)
from tests.stack import wait_for

pytestmark = [pytest.mark.integration]


def sim(*steps, **fields) -> dict:
    return {"jobType": "SIMULATION", "payload": {"steps": list(steps)}, **fields}


LOG = {"action": "LOG", "message": "x"}


def sleep(ms: int) -> dict:
    return {"action": "SLEEP", "durationMs": ms}


def post(client, path: str, body=None):
    return client.post(path, json.dumps(body or {}), content_type="application/json")


def wait_workflow(workflow_id, *statuses: str, timeout: float = 90) -> WorkflowRow:
    return wait_for(
        lambda: WorkflowRow.objects.filter(id=workflow_id, status__in=statuses).first(),
        timeout=timeout,
        interval=0.1,
        message=f"workflow {workflow_id} to reach {'/'.join(statuses)}",
    )


def jobs_of(workflow_id) -> list:
    return list(
        JobExecution.objects.filter(job__workflow_node__workflow_id=workflow_id).values_list(
            "job_id", flat=True
        )
    )


def attempts_by_ref(workflow_id) -> dict[str, list[ExecutionAttempt]]:
    attempts: dict[str, list] = {}
    for attempt in ExecutionAttempt.objects.filter(
        job__workflow_node__workflow_id=workflow_id
    ).select_related("job__workflow_node"):
        attempts.setdefault(attempt.job.workflow_node.ref, []).append(attempt)
    return attempts


def test_a_diamond_runs_each_job_after_its_dependencies_and_announces_its_finish(stack, live_db):
    client = token_client()
    body = {
        "name": "diamond",
        "jobs": [
            {"ref": "extract", "job": sim(LOG, sleep(200))},
            {"ref": "left", "dependsOn": ["extract"], "job": sim(sleep(300))},
            {"ref": "right", "dependsOn": ["extract"], "job": sim(sleep(100))},
            {"ref": "merge", "dependsOn": ["left", "right"], "job": sim(LOG)},
        ],
    }
    response = post(client, "/api/workflows", body)
    assert response.status_code == 202, response.content
    workflow_id = response.json()["workflowId"]

    wait_workflow(workflow_id, "COMPLETED")

    attempts = {ref: one for ref, [one] in attempts_by_ref(workflow_id).items()}
    assert attempts["left"].started_at >= attempts["extract"].finished_at
    assert attempts["right"].started_at >= attempts["extract"].finished_at
    assert attempts["merge"].started_at >= max(
        attempts["left"].finished_at, attempts["right"].finished_at
    )
    event = read_event(WORKFLOW_FINISHED, workflow_id)
    assert (event["name"], event["status"]) == ("diamond", "COMPLETED")
    detail = client.get(f"/api/workflows/{workflow_id}").json()
    assert {job["status"] for job in detail["jobs"]} == {"COMPLETED"}
    assert_invariants(jobs_of(workflow_id))


FAN_INS, WIDTH = 200, 10


def fan_ins(count: int) -> list[uuid.UUID]:
    """`count` workflows of WIDTH parallel jobs joined by one, submitted back to back."""
    spec = parse_workflow_request(
        {
            "name": "fan-in",
            "jobs": [{"ref": f"p{n}", "job": sim(LOG)} for n in range(WIDTH)]
            + [{"ref": "join", "dependsOn": [f"p{n}" for n in range(WIDTH)], "job": sim(LOG)}],
        }
    )
    return [workflow_submit(spec=spec).id for _ in range(count)]


def assert_each_join_ran_once_after_its_parents(workflow_ids, *, lost_allowed: bool) -> None:
    joins = {}
    for workflow_id in workflow_ids:
        attempts = attempts_by_ref(workflow_id)
        [success] = [a for a in attempts["join"] if a.outcome == "SUCCESS"]
        parents_done = max(
            a.finished_at for ref, runs in attempts.items() if ref != "join" for a in runs
        )
        first = min(a.started_at for a in attempts["join"])
        assert first >= parents_done, f"the join of {workflow_id} started early"
        others = [a.outcome for a in attempts["join"] if a is not success]
        assert others == [] or (lost_allowed and set(others) == {"LOST"}), others
        joins[workflow_id] = success
    assert len(joins) == len(workflow_ids)


def test_two_hundred_fan_ins_on_three_executors_release_each_join_exactly_once(stack, live_db):
    live_executors(stack, 3)
    started = time.monotonic()
    workflow_ids = fan_ins(FAN_INS)

    for workflow_id in workflow_ids:
        wait_workflow(workflow_id, "COMPLETED", timeout=240)

    print(f"\n{FAN_INS} fan-ins of {WIDTH}: done in {time.monotonic() - started:.1f} s")
    assert_each_join_ran_once_after_its_parents(workflow_ids, lost_allowed=False)
    assert (
        len(
            {
                worker_pid(a)
                for a in ExecutionAttempt.objects.filter(
                    job__workflow_node__workflow_id__in=workflow_ids
                )
            }
        )
        >= 2
    )
    assert_invariants([j for w in workflow_ids for j in jobs_of(w)])


def test_fan_ins_survive_an_executor_killed_mid_run(stack, live_db):
    live_executors(stack, 3)
    spec = parse_workflow_request(
        {
            "name": "fan-in-slow",
            "jobs": [{"ref": f"p{n}", "job": sim(sleep(50))} for n in range(WIDTH)]
            + [
                {"ref": "join", "dependsOn": [f"p{n}" for n in range(WIDTH)], "job": sim(sleep(50))}
            ],
        }
    )
    workflow_ids = [workflow_submit(spec=spec).id for _ in range(FAN_INS // 4)]
    victim = stack.executors[-1]
    wait_for(
        lambda: ExecutionAttempt.objects.filter(
            worker_id__contains=f":{victim.pid}:",
            job__workflow_node__workflow_id__in=workflow_ids,
        ).exists(),
        timeout=60,
        message="the victim to run some of the work",
    )

    victim.signal(signal.SIGKILL)
    victim.process.wait(10)
    stack.executors.remove(victim)

    for workflow_id in workflow_ids:
        wait_workflow(workflow_id, "COMPLETED", timeout=240)
    assert_each_join_ran_once_after_its_parents(workflow_ids, lost_allowed=True)
    assert_invariants([j for w in workflow_ids for j in jobs_of(w)])


def test_a_failure_cancels_its_dependents_and_a_retry_completes_the_workflow(stack, live_db):
    client = token_client()
    body = {
        "name": "partly-failing",
        "jobs": [
            # Fails its first attempt, with no retry left: FAILED until an operator retries.
            {
                "ref": "shaky",
                "job": sim({"action": "FLAKY", "failTimes": 1, "message": "once"}, maxRetryCount=0),
            },
            {"ref": "after", "dependsOn": ["shaky"], "job": sim(LOG)},
            {"ref": "last", "dependsOn": ["after"], "job": sim(LOG)},
            {
                "ref": "tolerant",
                "dependsOn": ["shaky"],
                "ignoreFailedDependencies": True,
                "job": sim(LOG),
            },
            {"ref": "independent", "job": sim(sleep(100))},
        ],
    }
    workflow_id = post(client, "/api/workflows", body).json()["workflowId"]

    wait_workflow(workflow_id, "FAILED")

    jobs = {j["ref"]: j for j in client.get(f"/api/workflows/{workflow_id}").json()["jobs"]}
    assert {ref: j["status"] for ref, j in jobs.items()} == {
        "shaky": "FAILED",
        "after": "CANCELLED",
        "last": "CANCELLED",
        "tolerant": "COMPLETED",
        "independent": "COMPLETED",
    }
    after = client.get(f"/api/jobs/{jobs['after']['jobId']}").json()
    assert after["lastError"] == "dependency shaky failed"
    assert client.get(f"/api/jobs/{jobs['last']['jobId']}").json()["lastError"] == (
        "dependency after failed"
    )
    assert read_event(WORKFLOW_FINISHED, workflow_id)["status"] == "FAILED"

    assert post(client, f"/api/jobs/{jobs['shaky']['jobId']}/retry").status_code == 200

    wait_workflow(workflow_id, "COMPLETED")
    assert_invariants(jobs_of(workflow_id))


def test_a_running_workflow_is_cancelled_within_a_second(stack, live_db):
    client = token_client()
    body = {
        "name": "to-cancel",
        "jobs": [
            {"ref": "long", "job": sim(sleep(60_000))},
            {"ref": "next", "dependsOn": ["long"], "job": sim(LOG)},
        ],
    }
    workflow_id = post(client, "/api/workflows", body).json()["workflowId"]
    wait_for(
        lambda: ExecutionAttempt.objects.filter(
            job__workflow_node__workflow_id=workflow_id, outcome="RUNNING"
        ).exists(),
        timeout=60,
        message="the long job to run",
    )

    requested = timezone.now()
    response = post(client, f"/api/workflows/{workflow_id}/cancel")
    assert response.status_code == 200, response.content

    cancelled = wait_workflow(workflow_id, "CANCELLED", timeout=10)
    assert (cancelled.finished_at - requested).total_seconds() < 1.0
    assert read_event(WORKFLOW_FINISHED, workflow_id)["status"] == "CANCELLED"
    assert_invariants(jobs_of(workflow_id))


def test_results_flow_through_a_dag_a_chain_and_a_chord(stack, live_db):
    sums = Workflow("sums")
    left, right = sums.add("left", add, args=[2, 3]), sums.add("right", add, args=[4, 5])
    sums.add("total", sum_parents, after=[left, right])
    enqueued = [
        sums.enqueue(),
        chain(add.s(1, 2), add.s(10)).enqueue(),
        chord(group(add.s(1, 1), add.s(2, 2)), sum_list.s()).enqueue(),
    ]

    for workflow in enqueued:
        wait_workflow(workflow.id, "COMPLETED")
    values = [workflow.get_result(list(workflow.jobs)[-1]).return_value for workflow in enqueued]
    assert values == [14, 13, 6]
    assert_invariants([j for w in enqueued for j in w.jobs.values()])
