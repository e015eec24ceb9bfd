"""On whose authority the Tasks API reads (§17): code calling `get_result` has the server's
(any job); inside a request JobWeaver serves, the request's user is bound and `get_result`
sees only what that user may see. An enqueue's idempotent replay keeps the enqueuer's."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user, token_for
from jobweaver.core.authority import acting_as, bound_user
from jobweaver.jobs.python_tasks.compat import TaskResultDoesNotExist
from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver_site.examples.tasks import add

pytestmark = pytest.mark.django_db

VIEW_ALL = "jobweaver_jobs.view_all_jobs"


def task_job(user) -> str:
    body = {"jobType": "TASK", "payload": {"task": add.module_path, "args": [1, 2]}}
    return str(job_submit(spec=parse_job_request(body), submitted_by=user).job.id)


def test_code_reads_any_result_and_a_bound_user_only_what_they_may_see():
    alice, bob = make_user("alice", *SUBMITTER), make_user("bob", *SUBMITTER)
    operator = make_user("olga", *SUBMITTER, VIEW_ALL)
    alices, from_code = task_job(alice), add.enqueue(2, 3).id

    assert add.get_result(alices).id == alices  # the server's authority
    with acting_as(alice):
        assert add.get_result(alices).id == alices
        with pytest.raises(TaskResultDoesNotExist):
            add.get_result(from_code)
    with acting_as(bob), pytest.raises(TaskResultDoesNotExist):
        add.get_result(alices)
    with acting_as(operator):
        assert {add.get_result(alices).id, add.get_result(from_code).id} == {alices, from_code}
    assert bound_user() is None


def test_an_idempotent_replay_inside_a_request_returns_the_first_job():
    keyed = add.with_options(idempotency_key="invoice-1")
    first = keyed.enqueue(1, 1)
    with acting_as(make_user("carol", *SUBMITTER)):
        again = keyed.enqueue(1, 1)
    assert again.id == first.id


def test_the_api_binds_its_user_for_the_request_and_unbinds_after(monkeypatch):
    from jobweaver.jobs.api import views

    seen = []
    original = views.job_detail

    def recording(*args, **kwargs):
        seen.append(bound_user())
        return original(*args, **kwargs)

    monkeypatch.setattr(views, "job_detail", recording)
    dana = make_user("dana", *SUBMITTER)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(dana)}")
    job_id = task_job(dana)
    response = client.get(f"/api/jobs/{job_id}")
    assert response.status_code == 200, json.dumps(response.json())
    assert [user.pk for user in seen] == [dana.pk]
    assert bound_user() is None
