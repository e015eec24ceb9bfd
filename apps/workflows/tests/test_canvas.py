"""Workflows from Python (apps/workflows/canvas.py) run whole by `jobweaver.testing`'s eager
mode through the real runner: Celery's canvas rules for results (§16), `context.parent_results`
in any DAG, a workflow enqueued in the caller's transaction (a rollback leaves nothing), and
bad graphs refused before anything is written. With real executors:
tests/integration/test_workflows.py."""

from __future__ import annotations

import pytest
from django.db import transaction

from jobweaver.core.errors import InvalidRequest
from jobweaver.jobs.models import Job
from jobweaver.workflows import Workflow, chain, chord, group
from jobweaver.workflows.models import Workflow as WorkflowRow
from jobweaver_site.examples.tasks import add, always_fails, sum_list, sum_parents

pytestmark = pytest.mark.django_db


def test_a_chain_passes_each_result_on_as_the_first_argument(jobweaver_eager):
    enqueued = chain(add.s(1, 2), add.s(10)).enqueue()

    last = list(enqueued.jobs)[-1]
    assert enqueued.get_result(last).return_value == 13
    assert WorkflowRow.objects.get(id=enqueued.id).status == "COMPLETED"


def test_an_immutable_signature_takes_no_result(jobweaver_eager):
    enqueued = chain(add.s(1, 2), add.si(5, 5)).enqueue()
    assert enqueued.get_result(list(enqueued.jobs)[-1]).return_value == 10


def test_a_chord_callback_gets_the_group_s_results_as_a_list_in_order(jobweaver_eager):
    enqueued = chord(group(add.s(1, 1), add.s(2, 2)), sum_list.s()).enqueue()

    refs = list(enqueued.jobs)
    assert [enqueued.get_result(ref).return_value for ref in refs] == [2, 4, 6]


def test_a_dag_reads_its_parents_results_by_ref(jobweaver_eager):
    workflow = Workflow("sums")
    left = workflow.add("left", add, args=[2, 3])
    right = workflow.add("right", add.s(4, 5))
    workflow.add("total", sum_parents, after=[left, right])

    enqueued = workflow.enqueue()

    assert enqueued.get_result("total").return_value == 14
    assert WorkflowRow.objects.get(id=enqueued.id).status == "COMPLETED"


def test_a_failed_job_cancels_what_depends_on_it(jobweaver_eager):
    enqueued = chain(always_fails.with_options(max_retries=0).si("no"), add.s(1)).enqueue()

    first, second = list(enqueued.jobs)
    assert enqueued.get_result(first).status == "FAILED"
    assert Job.objects.get(id=enqueued.jobs[second]).execution.last_error == (
        f"dependency {first} failed"
    )
    assert WorkflowRow.objects.get(id=enqueued.id).status == "FAILED"


def test_a_workflow_is_written_in_the_caller_s_transaction():
    before = (Job.objects.count(), WorkflowRow.objects.count())
    with pytest.raises(RuntimeError), transaction.atomic():
        group(add.s(1, 1), add.s(2, 2)).enqueue("rolled back")
        raise RuntimeError("the caller's transaction fails")
    assert (Job.objects.count(), WorkflowRow.objects.count()) == before


def test_a_bad_graph_is_refused_before_anything_is_written():
    workflow = Workflow("loop")
    workflow.add("a", add, args=[1, 1], after=["b"])
    workflow.add("b", add, args=[1, 1], after=["a"])
    before = Job.objects.count()
    with pytest.raises(InvalidRequest, match="cycle"):
        workflow.enqueue()
    assert Job.objects.count() == before
    with pytest.raises(TypeError):
        group(add)
