"""The operators' admin pages render, find the right jobs and act through the job services.

Database tests: jobs are created by the submission service; the on-commit dispatch never fires
inside a test transaction, so submitted jobs stay PENDING.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobweaver.core.timeutil import iso
from jobweaver.executor.models import AttemptOutcome, ExecutionAttempt
from jobweaver.jobs.models import Job
from jobweaver.jobs.services import job_cancel, job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.outbox.models import OutboxEvent
from jobweaver.scheduler.models import ExecutionStatus, JobExecution

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:jobweaver_jobs_job_changelist")


def submit(trace_id: str | None = None, **fields) -> Job:
    request = {
        "jobType": "SIMULATION",
        "payload": {"steps": [{"action": "LOG", "message": "hello from the admin test"}]},
        **fields,
    }
    return job_submit(spec=parse_job_request(request), trace_id=trace_id).job


def listed_ids(response) -> set[uuid.UUID]:
    assert response.status_code == 200
    return {job.id for job in response.context["cl"].result_list}


def status_of(job: Job) -> str:
    return JobExecution.objects.get(job_id=job.id).status


def post_action(client, action: str, jobs: list[Job]):
    return client.post(
        CHANGELIST,
        {"action": action, "_selected_action": [str(job.id) for job in jobs], "index": 0},
        follow=True,
    )


def shown_messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def test_changelist_lists_jobs_with_their_execution_state(admin_client):
    first, second = submit(priority=7, maxRetryCount=2), submit()

    response = admin_client.get(CHANGELIST)

    assert {first.id, second.id} <= listed_ids(response)
    content = response.content.decode()
    assert reverse("admin:jobweaver_jobs_job_change", args=[first.id]) in content
    assert "PENDING" in content
    assert "0 / 2" in content  # retries used / allowed


def test_changelist_queries_do_not_grow_with_the_number_of_jobs(admin_client):
    submit(), submit()
    with CaptureQueriesContext(connection) as few:
        admin_client.get(CHANGELIST)
    for _ in range(5):
        submit()
    with CaptureQueriesContext(connection) as more:
        admin_client.get(CHANGELIST)

    assert len(more) == len(few)


def test_change_page_shows_job_execution_and_attempts(admin_client):
    job = submit(trace_id=f"trace-{uuid.uuid4().hex}", maxRetryCount=4)
    started_at = timezone.now() - timedelta(seconds=3)
    finished_at = started_at + timedelta(milliseconds=1234)
    ExecutionAttempt.objects.create(
        event_id=uuid.uuid4(),
        job=job,
        attempt=1,
        trace_id=job.trace_id,
        worker_id="executor-test@host",
        started_at=started_at,
        finished_at=finished_at,
        outcome=AttemptOutcome.FAILURE,
        error_message="boom from attempt one",
        steps_completed=0,
        total_steps=1,
    )

    response = admin_client.get(reverse("admin:jobweaver_jobs_job_change", args=[job.id]))

    assert response.status_code == 200
    content = response.content.decode()
    for expected in (
        str(job.id),
        job.trace_id,
        "hello from the admin test",  # the steps
        "Pending",
        "0 / 4",  # retries used / allowed
        iso(JobExecution.objects.get(job_id=job.id).next_run_at),
        "executor-test@host",
        iso(started_at),  # with milliseconds, as in the API
        iso(finished_at),
        "FAILURE",
        "boom from attempt one",
        "0 / 1",  # steps completed / total
    ):
        assert expected in content, expected
    # Read-only: no save button, no way to add or delete rows.
    assert 'name="_save"' not in content


def test_jobs_cannot_be_added_or_edited_in_the_admin(admin_client):
    job = submit(priority=3)

    assert admin_client.get(reverse("admin:jobweaver_jobs_job_add")).status_code == 403
    response = admin_client.post(
        reverse("admin:jobweaver_jobs_job_change", args=[job.id]), {"priority": 9}
    )

    assert response.status_code == 403
    job.refresh_from_db()
    assert job.priority == 3


def test_filter_by_execution_status_and_job_type(admin_client):
    pending, cancelled = submit(), submit()
    job_cancel(job_id=cancelled.id)

    only_cancelled = listed_ids(admin_client.get(CHANGELIST, {"execution__status": "CANCELLED"}))
    only_pending = listed_ids(admin_client.get(CHANGELIST, {"execution__status": "PENDING"}))
    simulations = listed_ids(admin_client.get(CHANGELIST, {"job_type": "SIMULATION"}))

    assert cancelled.id in only_cancelled and pending.id not in only_cancelled
    assert pending.id in only_pending and cancelled.id not in only_pending
    assert {pending.id, cancelled.id} <= simulations


@pytest.mark.parametrize(
    "spelling", [str, lambda job_id: str(job_id).upper(), lambda job_id: job_id.hex]
)
def test_search_by_job_id_finds_exactly_that_job(admin_client, spelling):
    wanted, other = submit(), submit()

    found = listed_ids(admin_client.get(CHANGELIST, {"q": f" {spelling(wanted.id)} "}))

    assert found == {wanted.id}
    assert other.id not in found


def test_search_by_trace_id_finds_the_jobs_of_that_trace(admin_client):
    trace_id = f"checkout-{uuid.uuid4().hex[:12]}"
    wanted, other = submit(trace_id=trace_id), submit()
    uuid_trace = submit()  # default trace ids are a UUID's hex

    assert listed_ids(admin_client.get(CHANGELIST, {"q": trace_id})) == {wanted.id}
    assert listed_ids(admin_client.get(CHANGELIST, {"q": uuid_trace.trace_id})) == {uuid_trace.id}
    # Exact, not a substring match.
    assert wanted.id not in listed_ids(admin_client.get(CHANGELIST, {"q": trace_id[:-1]}))
    assert other.id not in listed_ids(admin_client.get(CHANGELIST, {"q": trace_id}))


def test_search_for_an_unknown_id_finds_nothing(admin_client):
    submit()

    assert listed_ids(admin_client.get(CHANGELIST, {"q": str(uuid.uuid4())})) == set()
    assert listed_ids(admin_client.get(CHANGELIST, {"q": "no-such-trace"})) == set()


def test_cancel_action_cancels_pending_jobs_and_reports_skipped_ones(admin_client):
    pending, already_cancelled = submit(), submit()
    job_cancel(job_id=already_cancelled.id)

    response = post_action(admin_client, "cancel_jobs", [pending, already_cancelled])

    assert status_of(pending) == ExecutionStatus.CANCELLED
    assert status_of(already_cancelled) == ExecutionStatus.CANCELLED
    shown = shown_messages(response)
    assert any(message.startswith("Cancelled 1 job;") for message in shown), shown
    assert any(
        message.startswith("Skipped 1 job:") and str(already_cancelled.id) in message
        for message in shown
    ), shown


def test_retry_action_retries_cancelled_jobs_and_skips_others(admin_client):
    cancelled, pending = submit(), submit()
    job_cancel(job_id=cancelled.id)
    pending_version = JobExecution.objects.get(job_id=pending.id).version

    response = post_action(admin_client, "retry_jobs", [cancelled, pending])

    retried = JobExecution.objects.get(job_id=cancelled.id)
    assert retried.status == ExecutionStatus.PENDING
    assert retried.retry_count == 0
    assert retried.finished_at is None
    untouched = JobExecution.objects.get(job_id=pending.id)
    assert (untouched.status, untouched.version) == (ExecutionStatus.PENDING, pending_version)
    shown = shown_messages(response)
    assert "Retried 1 job." in shown
    skipped = [message for message in shown if message.startswith("Skipped 1 job:")]
    assert len(skipped) == 1 and str(pending.id) in skipped[0], shown


def test_actions_need_the_change_job_permission(client):
    viewer = get_user_model().objects.create_user(
        username=f"viewer-{uuid.uuid4().hex[:8]}", password="x", is_staff=True
    )
    # It sees every user's jobs (the job below has none), it may act on none.
    viewer.user_permissions.add(
        Permission.objects.get(codename="view_job"),
        Permission.objects.get(codename="view_all_jobs"),
    )
    client.force_login(viewer)
    job = submit()

    page = client.get(CHANGELIST)
    response = post_action(client, "cancel_jobs", [job])

    assert job.id in listed_ids(page)
    assert "cancel_jobs" not in page.content.decode()
    assert status_of(job) == ExecutionStatus.PENDING
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("url_name", "query"),
    [
        ("admin:jobweaver_scheduler_jobexecution_changelist", {}),
        ("admin:jobweaver_scheduler_jobexecution_changelist", {"status": "PENDING"}),
        ("admin:jobweaver_executor_executionattempt_changelist", {}),
        ("admin:jobweaver_executor_executionattempt_changelist", {"outcome": "FAILURE"}),
        ("admin:jobweaver_outbox_outboxevent_changelist", {}),
        (
            "admin:jobweaver_outbox_outboxevent_changelist",
            {"topic": "job-created", "published": "no"},
        ),
        ("admin:jobweaver_outbox_outboxevent_changelist", {"published": "yes"}),
    ],
)
def test_read_only_changelists_render(admin_client, url_name, query):
    submit()

    assert admin_client.get(reverse(url_name), query).status_code == 200


def test_execution_admin_finds_a_job_by_id(admin_client):
    wanted, other = submit(), submit()

    response = admin_client.get(
        reverse("admin:jobweaver_scheduler_jobexecution_changelist"), {"q": str(wanted.id)}
    )

    assert response.status_code == 200
    found = [execution.job_id for execution in response.context["cl"].result_list]
    assert found == [wanted.id]
    assert other.id not in found


def test_outbox_admin_filters_unpublished_events_of_a_job(admin_client):
    job = submit()
    created_event = OutboxEvent.objects.get(key=str(job.id), topic="job-created")

    unpublished = admin_client.get(
        reverse("admin:jobweaver_outbox_outboxevent_changelist"),
        {"published": "no", "topic": "job-created", "q": str(job.id)},
    )
    published = admin_client.get(
        reverse("admin:jobweaver_outbox_outboxevent_changelist"),
        {"published": "yes", "q": str(job.id)},
    )

    assert [event.id for event in unpublished.context["cl"].result_list] == [created_event.id]
    assert list(published.context["cl"].result_list) == []
    detail = admin_client.get(
        reverse("admin:jobweaver_outbox_outboxevent_change", args=[created_event.id])
    )
    assert detail.status_code == 200
    assert 'name="_save"' not in detail.content.decode()
