"""Workflows in the engine (ARCHITECTURE §16), through the real services and the executor's own
transactions, no broker: jobs wait for their dependencies, a completion releases them in its
transaction, a failure cancels its dependents down the graph, an operator's retry brings them
back, a cancel stops the lot, and the workflow's status and its WorkflowFinished follow. With
real executors: tests/integration/test_workflows.py."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.db import connection

from jobweaver.core.errors import InvalidStateTransition
from jobweaver.core.kafka import WORKFLOW_FINISHED
from jobweaver.executor.services import attempt_finish, attempt_start
from jobweaver.jobs.services import job_cancel, job_retry
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.dispatch import dispatch_due_jobs
from jobweaver.scheduler.invariants import check_invariants
from jobweaver.scheduler.models import JobExecution
from jobweaver.scheduler.tests.factories import WORKER, finished, live_executor, started
from jobweaver.workflows.models import Node, Workflow
from jobweaver.workflows.services import workflow_cancel, workflow_submit
from jobweaver.workflows.validation import parse_workflow_request

LOG = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}


def submit(*items, name="wf") -> Workflow:
    """Items: (ref, [dependencies], {item fields}) with the fields optional."""
    jobs = []
    for ref, after, *fields in items:
        jobs.append({"ref": ref, "dependsOn": after, "job": LOG, **(fields[0] if fields else {})})
    return workflow_submit(spec=parse_workflow_request({"name": name, "jobs": jobs}))


def statuses(workflow: Workflow) -> dict[str, str]:
    by_job = dict(
        JobExecution.objects.filter(job__workflow_node__workflow=workflow).values_list(
            "job_id", "status"
        )
    )
    return {ref: by_job[job.id] for ref, job in workflow.jobs_by_ref.items()}


def job(workflow: Workflow, ref: str):
    return workflow.jobs_by_ref[ref].id


def fail(job_id, *, retryable: bool = False) -> None:
    claimed = started(job_id)
    assert attempt_finish(
        claimed=claimed,
        outcome="FAILURE",
        error="boom",
        retryable=retryable,
        steps_completed=0,
        log_lines=[],
    )


def finished_events(workflow: Workflow) -> list[dict]:
    return list(
        OutboxEvent.objects.filter(topic=WORKFLOW_FINISHED, key=str(workflow.id))
        .order_by("created_at")
        .values_list("payload", flat=True)
    )


DIAMOND = (
    ("extract", []),
    ("left", ["extract"]),
    ("right", ["extract"]),
    ("merge", ["left", "right"]),
)


def all_jobs(workflow: Workflow) -> list:
    return [j.id for j in workflow.jobs_by_ref.values()]


@pytest.mark.django_db
def test_a_diamond_releases_each_job_once_all_its_dependencies_completed():
    workflow = submit(*DIAMOND, name="nightly")
    assert statuses(workflow) == {
        "extract": "PENDING",
        "left": "WAITING",
        "right": "WAITING",
        "merge": "WAITING",
    }
    live_executor()
    sent: list = []
    # WAITING jobs are never dispatched.
    assert dispatch_due_jobs(job_ids=all_jobs(workflow), publish=sent.extend) == [
        job(workflow, "extract")
    ]
    claimed = attempt_start(
        job_id=job(workflow, "extract"), event_id=uuid.UUID(sent[0][1]), worker_id=WORKER
    )
    assert attempt_finish(claimed=claimed, outcome="SUCCESS", steps_completed=1, log_lines=[])
    assert statuses(workflow)["left"] == statuses(workflow)["right"] == "PENDING"
    assert statuses(workflow)["merge"] == "WAITING"

    finished(job(workflow, "left"))
    assert statuses(workflow)["merge"] == "WAITING"
    assert Node.objects.get(job_id=job(workflow, "merge")).waiting_on == 1
    finished(job(workflow, "right"))
    assert statuses(workflow)["merge"] == "PENDING"
    workflow.refresh_from_db()
    assert (workflow.status, workflow.unfinished) == ("RUNNING", 1)

    finished(job(workflow, "merge"))
    workflow.refresh_from_db()
    assert (workflow.status, workflow.unfinished, workflow.failed) == ("COMPLETED", 0, 0)
    assert workflow.finished_at is not None
    [event] = finished_events(workflow)
    assert event["workflowId"] == str(workflow.id)
    assert (event["name"], event["status"]) == ("nightly", "COMPLETED")
    assert check_invariants(job_ids=all_jobs(workflow)) == []


@pytest.mark.django_db
def test_a_failure_cancels_its_dependents_down_the_graph_and_a_retry_brings_them_back():
    workflow = submit(
        ("a", []),
        ("b", ["a"]),
        ("c", ["b"]),
        ("tolerant", ["a"], {"ignoreFailedDependencies": True}),
        ("other", []),
    )
    fail(job(workflow, "a"))

    assert statuses(workflow) == {
        "a": "FAILED",
        "b": "CANCELLED",
        "c": "CANCELLED",
        "tolerant": "PENDING",  # it runs once its dependencies have all finished
        "other": "PENDING",
    }
    errors = dict(
        JobExecution.objects.filter(job_id__in=all_jobs(workflow)).values_list(
            "job_id", "last_error"
        )
    )
    assert errors[job(workflow, "b")] == "dependency a failed"
    assert errors[job(workflow, "c")] == "dependency b failed"
    finished(job(workflow, "tolerant"))
    finished(job(workflow, "other"))
    workflow.refresh_from_db()
    assert (workflow.status, workflow.failed) == ("FAILED", 1)
    assert [e["status"] for e in finished_events(workflow)] == ["FAILED"]

    job_retry(job_id=job(workflow, "a"))

    assert statuses(workflow) == {
        "a": "PENDING",
        "b": "WAITING",
        "c": "WAITING",
        "tolerant": "COMPLETED",
        "other": "COMPLETED",
    }
    workflow.refresh_from_db()
    assert (workflow.status, workflow.unfinished, workflow.failed) == ("RUNNING", 3, 0)
    for ref in ("a", "b", "c"):
        finished(job(workflow, ref))
    workflow.refresh_from_db()
    assert workflow.status == "COMPLETED"
    assert [e["status"] for e in finished_events(workflow)] == ["FAILED", "COMPLETED"]
    assert check_invariants(job_ids=all_jobs(workflow)) == []


@pytest.mark.django_db
def test_a_retryable_failure_with_retries_left_releases_nothing():
    workflow = submit(("a", [], {"job": {**LOG, "maxRetryCount": 1}}), ("b", ["a"]))
    fail(job(workflow, "a"), retryable=True)
    assert statuses(workflow) == {"a": "PENDING", "b": "WAITING"}


@pytest.mark.django_db
def test_cancelling_a_waiting_job_cancels_what_depends_on_it():
    workflow = submit(("a", []), ("b", ["a"]), ("c", ["b"]))
    job_cancel(job_id=job(workflow, "b"))
    assert statuses(workflow) == {"a": "PENDING", "b": "CANCELLED", "c": "CANCELLED"}
    finished(job(workflow, "a"))
    workflow.refresh_from_db()
    # Every job finished and none FAILED (§16): an operator's cancel of one is not a failure.
    assert (workflow.status, workflow.failed) == ("COMPLETED", 0)


@pytest.mark.django_db
def test_a_workflow_cancel_stops_every_unfinished_job():
    workflow = submit(("a", []), ("b", []), ("c", ["a", "b"]), ("d", ["c"]))
    running = started(job(workflow, "a"))

    cancelled = workflow_cancel(workflow_id=workflow.id)

    assert cancelled.status == "RUNNING"  # until the running job has stopped
    assert statuses(workflow) == {
        "a": "RUNNING",
        "b": "CANCELLED",
        "c": "CANCELLED",
        "d": "CANCELLED",
    }
    assert JobExecution.objects.get(job_id=job(workflow, "a")).cancel_requested
    assert attempt_finish(claimed=running, outcome="CANCELLED", steps_completed=0, log_lines=[])
    workflow.refresh_from_db()
    assert (workflow.status, workflow.unfinished) == ("CANCELLED", 0)
    assert [e["status"] for e in finished_events(workflow)] == ["CANCELLED"]
    with pytest.raises(InvalidStateTransition):
        workflow_cancel(workflow_id=workflow.id)
    assert check_invariants(job_ids=all_jobs(workflow)) == []


@pytest.mark.django_db(transaction=True)
def test_concurrent_completions_release_a_join_exactly_once():
    """Ten parents complete at the same moment in ten transactions: the join's count reaches
    zero in exactly one of them, so it is released once, and the workflow finishes once."""
    parents = [(f"p{n}", []) for n in range(10)]
    workflow = submit(*parents, ("join", [ref for ref, _ in parents]))
    claims = [started(job(workflow, ref)) for ref, _ in parents]
    gate = threading.Barrier(len(claims))
    errors: list = []

    def complete(claimed) -> None:
        try:
            gate.wait()
            assert attempt_finish(
                claimed=claimed, outcome="SUCCESS", steps_completed=0, log_lines=[]
            )
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=complete, args=(c,)) for c in claims]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert errors == []
    join = JobExecution.objects.get(job_id=job(workflow, "join"))
    assert (join.status, join.version) == ("PENDING", 1)  # one move: unblocked once
    assert Node.objects.get(job_id=join.job_id).waiting_on == 0
    finished(join.job_id)
    workflow.refresh_from_db()
    assert (workflow.status, workflow.unfinished) == ("COMPLETED", 0)
    assert len(finished_events(workflow)) == 1
