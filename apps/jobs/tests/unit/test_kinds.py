"""The job kinds registry (apps/jobs/kinds/) without a database: every JobType choice has its
kind, lookups, and what each kind decides for validation, the detail and the admin."""

from __future__ import annotations

import pytest

from jobweaver.core.errors import InvalidRequest
from jobweaver.executor.models import AttemptOutcome, ExecutionAttempt
from jobweaver.jobs.forms import JobSubmitForm
from jobweaver.jobs.kinds import KINDS, SIMULATION, TASK, all_kinds, kind_named, kind_of
from jobweaver.jobs.models import Job, JobType
from jobweaver.scheduler.models import ExecutionStatus, JobExecution

ADD = {"task": "jobweaver_site.examples.tasks.add", "args": [1, 2], "kwargs": {}}


def test_every_job_type_choice_has_exactly_one_kind_in_the_choices_order():
    assert [kind.name for kind in all_kinds()] == JobType.values == list(KINDS)


@pytest.mark.parametrize("kind", all_kinds(), ids=lambda kind: kind.name)
def test_a_kind_is_found_by_its_name_and_by_its_jobs(kind):
    assert kind_named(kind.name) is kind
    assert kind_of(Job(job_type=kind.name, instruction={})) is kind


@pytest.mark.parametrize("name", ["NOPE", "task", {}])
def test_an_unknown_kind_is_a_lookup_error(name):
    with pytest.raises(LookupError):
        kind_named(name)


def test_each_kind_validates_its_own_payload():
    assert SIMULATION.parse_payload({"steps": [{"action": "FAIL"}]}) == {
        "steps": [{"action": "FAIL", "message": "Simulated failure", "retryable": True}]
    }
    assert TASK.parse_payload(ADD) == {"steps": [], "task": ADD}
    with pytest.raises(InvalidRequest, match=r"payload\.steps must contain"):
        SIMULATION.parse_payload({"steps": []})
    with pytest.raises(InvalidRequest):
        TASK.parse_payload({"steps": [{"action": "FAIL"}]})


def test_a_simulation_counts_its_steps_and_a_task_what_it_reported():
    steps = [{"action": "LOG", "message": "a"}, {"action": "LOG", "message": "b"}]
    simulation = Job(job_type=SIMULATION.name, instruction={"steps": steps})
    task = Job(job_type=TASK.name, instruction=ADD)
    reported = ExecutionAttempt(total_steps=7)

    assert SIMULATION.total_steps(simulation, reported) == 2
    assert TASK.total_steps(task, reported) == 7
    assert TASK.total_steps(task, None) == 0


def test_only_a_completed_task_shows_its_successful_attempts_result():
    failed = ExecutionAttempt(outcome=AttemptOutcome.FAILURE, exception_type="x.Boom")
    succeeded = ExecutionAttempt(outcome=AttemptOutcome.SUCCESS, result=3)
    attempts = [failed, succeeded]

    job = Job(instruction=ADD, retry_on=["builtins.ConnectionError"], retry_jitter=0.5)
    completed = JobExecution(status=ExecutionStatus.COMPLETED, job=job)
    policy = {
        "retryOn": ["builtins.ConnectionError"],
        "retryBackoff": None,
        "retryJitter": 0.5,
        "hardTimeoutSeconds": None,
    }
    assert TASK.job_detail(completed, attempts) == {"result": 3, "retryPolicy": policy}
    running = JobExecution(status=ExecutionStatus.RUNNING, job=job)
    assert TASK.job_detail(running, attempts) == {"result": None, "retryPolicy": policy}
    assert TASK.attempt_detail(failed) == {
        "exceptionType": "x.Boom",
        "traceback": None,
        "result": None,
    }
    assert SIMULATION.job_detail(completed, attempts) == {}
    assert SIMULATION.attempt_detail(failed) == {}


def test_the_admin_shows_a_simulations_steps_and_a_tasks_call():
    steps = [{"action": "LOG", "message": "a"}]
    assert SIMULATION.admin_payload(Job(instruction={"steps": steps})) == steps
    assert TASK.admin_payload(Job(instruction=ADD)) == ADD
    assert (SIMULATION.shows_result, TASK.shows_result) == (False, True)


def test_the_submit_form_lists_each_kinds_inputs_after_the_job_type():
    form = JobSubmitForm()

    assert list(form.fields)[:5] == ["job_type", "steps", "task", "args", "kwargs"]
    assert form.fields["job_type"].choices == [
        ("SIMULATION", "Simulation steps"),
        ("TASK", "Python task"),
    ]
    assert (
        "jobweaver_site.examples.tasks.add",
        "jobweaver_site.examples.tasks.add",
    ) in form.fields["task"].choices


def test_a_task_in_the_submit_form_needs_its_task():
    assert TASK.form_errors({"task": ""}) == {"task": "choose the task to run"}
    assert TASK.form_errors({"task": "jobweaver_site.examples.tasks.add"}) == {}
    assert SIMULATION.form_errors({}) == {}
