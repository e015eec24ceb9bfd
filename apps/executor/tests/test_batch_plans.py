"""The executor's batched start, accept and success statements find their rows through the unique
job_id index whatever the plan (issue 34). Through a partial index of the work in flight they
read all of it, the entries that every earlier job's status changes left dead included: with
the from-states visible to the planner, PostgreSQL's custom plans (a prepared statement's
first executions, and later ones when they look cheaper) chose jw_execution_live_leases."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from jobweaver.jobs.services import job_submit_batch
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import JobExecution
from jobweaver.scheduler.tests.factories import dispatched

pytestmark = pytest.mark.django_db

PARTIAL_INDEXES = ("jw_execution_live_leases", "jw_execution_live_token")


def _a_queue_with_history() -> list[tuple]:
    """Many finished executions and two in flight, with statistics: the planner then expects
    a partial index of in-flight rows to hold a handful of rows, as it does under load."""
    spec = parse_job_request(
        {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
    )
    for _ in range(2):
        job_submit_batch(specs=[spec] * 1000)
    JobExecution.objects.update(status="COMPLETED")
    live = [(job.id, dispatched(job.id)) for job in job_submit_batch(specs=[spec, spec])]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobweaver_scheduler_jobexecution")
    return live


def _plan(sql: str, params: list) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)  # the values bound: a custom plan
        return "\n".join(line for (line,) in cursor.fetchall())


def test_the_batched_start_probes_the_job_id_index():
    from jobweaver.engine.store.executions import _start_many_sql

    live = _a_queue_with_history()
    document = [
        {"job_id": str(job_id), "event_id": str(event_id), "worker_id": "host:1:1"}
        for job_id, event_id in live
    ]
    plan = _plan(
        _start_many_sql("start"),
        [
            json.dumps(document),
            "host:1",
            "30 seconds",
            [job_id for job_id, _ in live],
            ["DISPATCHED"],
            ["default"],
            "host:1",
        ],
    )

    assert "jobweaver_scheduler_jobexecution_job_id_key" in plan, plan
    assert not any(index in plan for index in PARTIAL_INDEXES), plan


def test_the_batched_success_probes_the_job_id_index():
    from jobweaver.engine.store.executions import _complete_many_sql
    from jobweaver.engine.transitions import TRANSITIONS

    live = _a_queue_with_history()
    document = [
        {
            "job_id": str(job_id),
            "event_id": str(event_id),
            "steps_completed": 1,
            "total_steps": 1,
            "log_lines": None,
            "result": None,
        }
        for job_id, event_id in live
    ]
    events = [event.topic for event in TRANSITIONS["complete"].events]
    plan = _plan(
        _complete_many_sql("complete"),
        [json.dumps(document), [job_id for job_id, _ in live], ["RUNNING"], *events],
    )

    assert "jobweaver_scheduler_jobexecution_job_id_key" in plan, plan
    assert not any(index in plan for index in PARTIAL_INDEXES), plan


def test_the_batched_accept_probes_the_job_id_index():
    from jobweaver.engine.store.executions import _accept_many_sql

    live = _a_queue_with_history()
    document = [{"job_id": str(job_id), "event_id": str(event_id)} for job_id, event_id in live]
    plan = _plan(
        _accept_many_sql("accept"),
        [
            json.dumps(document),
            "host:1",
            "30 seconds",
            [job_id for job_id, _ in live],
            ["DISPATCHED"],
            ["default"],
            "host:1",
        ],
    )

    assert "jobweaver_scheduler_jobexecution_job_id_key" in plan, plan
    assert not any(index in plan for index in PARTIAL_INDEXES), plan


def test_the_batched_start_with_success_probes_the_job_id_index():
    from jobweaver.engine.store.executions import _start_and_complete_sql
    from jobweaver.engine.transitions import TRANSITIONS

    live = _a_queue_with_history()
    document = [
        {
            "job_id": str(job_id),
            "event_id": str(event_id),
            "worker_id": "host:1:1",
            "ran": 0.001,
            "steps_completed": 1,
            "total_steps": 1,
            "log_lines": None,
            "result": None,
        }
        for job_id, event_id in live
    ]
    events = [event.topic for event in TRANSITIONS["complete"].events]
    plan = _plan(
        _start_and_complete_sql("start", "complete"),
        [
            json.dumps(document),
            "host:1",
            [job_id for job_id, _ in live],
            ["DISPATCHED"],
            "host:1",
            *events,
        ],
    )

    assert "jobweaver_scheduler_jobexecution_job_id_key" in plan, plan
    assert not any(index in plan for index in PARTIAL_INDEXES), plan
