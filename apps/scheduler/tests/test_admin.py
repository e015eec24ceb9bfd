"""The read-only admins of executions, attempts and outbox events render and search exactly."""

import pytest

from jobweaver.jobs.services import job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.models import JobExecution

READ_ONLY_LISTS = [
    "/admin/jobweaver_scheduler/jobexecution/",
    "/admin/jobweaver_executor/executionattempt/",
    "/admin/jobweaver_outbox/outboxevent/",
]


@pytest.fixture
def job(db):
    body = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}
    return job_submit(spec=parse_job_request(body)).job


@pytest.mark.parametrize("url", READ_ONLY_LISTS)
def test_read_only_lists_render_for_any_search(admin_client, job, url):
    for term in ["", str(job.id), job.trace_id, "no-such-id"]:
        assert admin_client.get(url, {"q": term}).status_code == 200
    assert admin_client.get(url + "add/").status_code == 403


def test_execution_search_finds_the_job_by_id_or_trace_id_only(admin_client, job):
    url = "/admin/jobweaver_scheduler/jobexecution/"
    assert str(job.id) in admin_client.get(url, {"q": str(job.id)}).content.decode()
    assert str(job.id) in admin_client.get(url, {"q": job.trace_id}).content.decode()
    assert str(job.id) not in admin_client.get(url, {"q": "no-such-id"}).content.decode()


def test_executions_can_be_filtered_to_the_work_set_aside_by_a_limit(admin_client, job):
    url = "/admin/jobweaver_scheduler/jobexecution/"
    assert str(job.id) not in admin_client.get(url, {"set_aside__exact": "1"}).content.decode()
    JobExecution.objects.filter(job=job).update(set_aside=True)
    assert str(job.id) in admin_client.get(url, {"set_aside__exact": "1"}).content.decode()


def test_an_executions_page_shows_its_key_as_the_user_gave_it(admin_client, admin_user):
    body = {
        "jobType": "SIMULATION",
        "payload": {"steps": [{"action": "LOG", "message": "x"}]},
        "concurrencyKey": "customer-42",
    }
    job = job_submit(spec=parse_job_request(body), submitted_by=admin_user).job
    execution = JobExecution.objects.get(job=job)
    assert execution.concurrency_key == f"{admin_user.pk}\x1fcustomer-42"  # scoped to its owner

    page = admin_client.get(f"/admin/jobweaver_scheduler/jobexecution/{execution.pk}/change/")

    assert page.status_code == 200
    content = page.content.decode()
    assert "customer-42" in content and "\x1f" not in content
