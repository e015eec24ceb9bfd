"""The admin shows TASK jobs well (issue 11): the task path and arguments, the result, and the
exception of each failed attempt. Database tests; attempts run in-process."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from jobweaver.executor.models import ExecutionAttempt
from jobweaver.tasks.tests.test_backend import run_next_attempt
from jobweaver_site.examples.tasks import add, flaky

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def admin_client(client):
    user = get_user_model().objects.create_superuser(f"admin-{uuid.uuid4().hex[:8]}", "", "pw")
    client.force_login(user)
    return client


def test_a_completed_task_job_shows_its_payload_and_result(admin_client):
    result = add.enqueue(20, 22)
    run_next_attempt(result.id)

    page = admin_client.get(reverse("admin:jobweaver_jobs_job_change", args=[result.id]))

    assert page.status_code == 200
    html = page.content.decode()
    assert "jobweaver_site.examples.tasks.add" in html
    assert "<pre>42</pre>" in html  # the result
    assert "Python task" in html


def test_each_failed_attempt_shows_its_exception(admin_client):
    result = flaky.enqueue(1)
    run_next_attempt(result.id)
    run_next_attempt(result.id)
    failed = ExecutionAttempt.objects.get(job_id=result.id, attempt=1)

    job_page = admin_client.get(reverse("admin:jobweaver_jobs_job_change", args=[result.id]))
    attempt_page = admin_client.get(
        reverse("admin:jobweaver_executor_executionattempt_change", args=[failed.event_id])
    )

    assert job_page.status_code == attempt_page.status_code == 200
    assert "builtins.RuntimeError" in job_page.content.decode()
    attempt_html = attempt_page.content.decode()
    assert "RuntimeError: flaky: attempt 1 of 1 failing on purpose" in attempt_html
    assert "Traceback (most recent call last)" in attempt_html
