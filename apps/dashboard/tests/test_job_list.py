"""The admin's job list: columns, filters, search, a constant number of queries per page, and
the bulk actions on a selection and on every job matching the filter."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from jobweaver.dashboard.tests.helpers import (
    dead_letter,
    delayed_job,
    execution_of,
    failed_once,
    submitted_job,
)
from jobweaver.jobs.admin import JobAdmin
from jobweaver.jobs.models import Job
from jobweaver.jobs.services import job_cancel, job_submit
from jobweaver.jobs.validation import parse_job_request
from jobweaver.scheduler.tests.factories import dispatched

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:jobweaver_jobs_job_changelist")
# Session, user, the filtered count, the page (with executions joined): whatever the page size.
JOB_LIST_QUERIES = 4


def listed(response) -> set[uuid.UUID]:
    assert response.status_code == 200
    return {job.id for job in response.context["cl"].result_list}


def shown_messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


def bulk_url(action: str, **filters) -> str:
    url = reverse("admin:jobweaver_jobs_job_bulk", args=[action])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in filters.items()) if filters else "")


def test_job_list_queries_stay_constant_whatever_the_page_size(admin_client, monkeypatch):
    counts = []
    for jobs, page_size in ((2, 5), (30, 100), (30, 10)):
        for index in range(jobs - Job.objects.count()):  # top up to `jobs` jobs in all
            if index % 3 == 0:
                dead_letter("boom")
            else:
                failed_once("flaky")
        monkeypatch.setattr(JobAdmin, "list_per_page", page_size)
        admin_client.get(CHANGELIST)  # warm caches (content types, the session)
        with CaptureQueriesContext(connection) as queries:
            response = admin_client.get(CHANGELIST, {"has_error": "yes", "o": "-9"})
        assert response.status_code == 200
        counts.append(len(queries))
    assert counts == [JOB_LIST_QUERIES] * 3, [q["sql"][:120] for q in queries.captured_queries]


def test_columns_show_badge_short_id_with_copy_and_shortened_error(admin_client):
    long_error = "database exploded " + "x" * 200
    job = dead_letter(long_error)

    content = admin_client.get(CHANGELIST).content.decode()

    assert 'class="jw-badge jw-FAILED"' in content
    assert str(job.id)[:8] in content
    assert f'data-copy="{job.id}"' in content
    assert "database exploded" in content and "x" * 100 not in content.split("title=")[0]
    assert "…" in content


@pytest.mark.parametrize(
    ("query", "wanted", "unwanted"),
    [
        ({"execution__status": "RETRYING"}, "retrying", "pending"),
        ({"execution__status": "DELAYED"}, "delayed", "pending"),
        ({"execution__status": "DUE"}, "pending", "delayed"),
        ({"execution__status": "DEAD_LETTER"}, "dead", "pending"),
        ({"execution__status": "FAILED"}, "dead", "retrying"),
        ({"has_error": "yes"}, "retrying", "pending"),
        ({"has_error": "no"}, "pending", "dead"),
        ({"priority": "8"}, "urgent", "pending"),
        ({"created_at__gte": "2000-01-01 00:00:00+00:00"}, "pending", None),
    ],
)
def test_filters(admin_client, query, wanted, unwanted):
    jobs = {
        "pending": submitted_job(),
        "retrying": failed_once(),
        "delayed": delayed_job(),
        "dead": dead_letter(),
        "urgent": submitted_job(priority=8),
    }

    found = listed(admin_client.get(CHANGELIST, query))

    assert jobs[wanted].id in found
    if unwanted:
        assert jobs[unwanted].id not in found


def test_search_by_idempotency_key_error_text_and_worker(admin_client):
    steps = {"steps": [{"action": "LOG", "message": "hi"}]}
    keyed = job_submit(
        spec=parse_job_request({"jobType": "SIMULATION", "payload": steps}),
        idempotency_key="order-4711",
    ).job
    broken = dead_letter("connection refused by upstream")
    submitted_job()  # neither keyed nor broken

    assert listed(admin_client.get(CHANGELIST, {"q": "order-4711"})) == {keyed.id}
    assert listed(admin_client.get(CHANGELIST, {"q": "REFUSED BY"})) == {broken.id}
    in_flight = submitted_job()
    dispatched(in_flight.id)  # to the executor "testhost:4242"
    assert listed(admin_client.get(CHANGELIST, {"q": "testhost:4242"})) == {in_flight.id}


def test_retry_all_matching_asks_with_the_count_then_reports_done_and_skipped(admin_client):
    dead = [dead_letter("boom") for _ in range(3)]
    pending = submitted_job()

    confirm = admin_client.get(bulk_url("retry", execution__status="FAILED"))

    assert confirm.status_code == 200
    assert confirm.context["count"] == 3
    assert 'id="jw-confirm-count">3<' in confirm.content.decode()
    assert all(execution_of(job.id).status == "FAILED" for job in dead)  # nothing yet

    done = admin_client.post(
        bulk_url("retry", execution__status="FAILED"), {"confirm": "yes"}, follow=True
    )

    assert all(execution_of(job.id).status == "PENDING" for job in dead)
    assert execution_of(pending.id).version == execution_of(pending.id).version
    assert "Retried 3 jobs." in shown_messages(done)
    assert done.redirect_chain[-1][0].endswith("?execution__status=FAILED")
    summary = LogEntry.objects.filter(object_id=None).latest("action_time")
    assert summary.change_message == "Retry: 3 retried"
    assert "execution__status=FAILED" in summary.object_repr
    assert LogEntry.objects.filter(object_id__in=[str(j.id) for j in dead]).count() == 3


def test_cancel_all_matching_skips_finished_jobs_with_their_reason(admin_client):
    waiting = [submitted_job(priority=7) for _ in range(2)]
    finished = dead_letter(priority=7)

    response = admin_client.post(bulk_url("cancel", priority=7), {"confirm": "yes"}, follow=True)

    assert [execution_of(job.id).status for job in waiting] == ["CANCELLED", "CANCELLED"]
    shown = shown_messages(response)
    assert "Cancelled 2 jobs; a running job stops at its next checkpoint." in shown
    assert any(
        m.startswith("Skipped 1 job: 1 x job is FAILED; it cannot be cancelled")
        and str(finished.id) in m
        for m in shown
    ), shown
    summary = LogEntry.objects.filter(object_id=None).latest("action_time")
    assert summary.change_message == (
        "Cancel: 2 cancelled, 1 skipped (1 job is FAILED; it cannot be cancelled)"
    )


def test_select_across_goes_to_the_confirmation_page(admin_client):
    job = dead_letter()

    response = admin_client.post(
        CHANGELIST + "?execution__status=FAILED",
        {
            "action": "retry_jobs",
            "_selected_action": [str(job.id)],
            "select_across": "1",
            "index": 0,
        },
    )

    assert response.status_code == 302
    assert response["Location"] == bulk_url("retry", execution__status="FAILED")
    assert execution_of(job.id).status == "FAILED"


def test_run_now_makes_delayed_jobs_due_and_skips_due_ones(admin_client):
    delayed, due = delayed_job(), submitted_job()

    response = admin_client.post(
        CHANGELIST,
        {"action": "run_now_jobs", "_selected_action": [str(delayed.id), str(due.id)], "index": 0},
        follow=True,
    )

    execution = execution_of(delayed.id)
    assert execution.status == "PENDING"
    assert execution.next_run_at <= execution.updated_at
    shown = shown_messages(response)
    assert "Made 1 job due now." in shown
    assert any("job is already due" in m and str(due.id) in m for m in shown), shown


def test_discard_action_and_the_job_page_buttons(admin_client):
    dead, cancelled = dead_letter(), submitted_job()
    job_cancel(job_id=cancelled.id)
    page = reverse("admin:jobweaver_jobs_job_change", args=[dead.id])

    response = admin_client.post(
        reverse("admin:jobweaver_jobs_job_bulk", args=["discard"]),
        {"ids": [str(dead.id), str(cancelled.id)], "next": page},
        follow=True,
    )

    assert response.redirect_chain[-1][0] == page
    shown = shown_messages(response)
    assert "Discarded 1 job; they stay FAILED with their history." in shown
    assert any("only dead-lettered (FAILED) jobs can be discarded" in m for m in shown), shown
    assert execution_of(dead.id).status == "FAILED"
    dead_letters = listed(admin_client.get(CHANGELIST, {"execution__status": "DEAD_LETTER"}))
    assert dead.id not in dead_letters


def test_view_only_staff_see_no_action_buttons_and_cannot_act(client):
    viewer = get_user_model().objects.create_user(
        username=f"viewer-{uuid.uuid4().hex[:8]}", password="x", is_staff=True
    )
    viewer.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(viewer)
    job = dead_letter()

    content = client.get(CHANGELIST).content.decode()
    page = client.get(reverse("admin:jobweaver_jobs_job_change", args=[job.id])).content.decode()

    assert 'id="jw-all-matching"' not in content
    assert 'id="jw-job-actions"' not in page
    assert client.get(bulk_url("retry")).status_code == 403
    assert client.post(bulk_url("retry"), {"confirm": "yes"}).status_code == 403
    assert client.get(reverse("admin:jobweaver_jobs_job_submit")).status_code == 403
    assert execution_of(job.id).status == "FAILED"


def test_non_staff_are_sent_to_the_login_page(client):
    user = get_user_model().objects.create_user(username=f"u-{uuid.uuid4().hex[:8]}")
    client.force_login(user)

    for url in (CHANGELIST, reverse("jobweaver-dashboard"), reverse("jobweaver-dead-letters")):
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], url


def test_job_page_shows_payload_path_attempts_logs_and_events(admin_client):
    job = dead_letter("it broke", log_lines=["step one says hi"])

    content = admin_client.get(
        reverse("admin:jobweaver_jobs_job_change", args=[job.id])
    ).content.decode()

    for expected in (
        'id="jw-job-panel"',
        'id="jw-job-status">FAILED<',
        "&quot;action&quot;: &quot;SLEEP&quot;",  # the payload, pretty-printed
        "submitted",
        "dispatched",
        "failed",
        "it broke",
        "step one says hi",
        "job-created",
        "job-dead-letter",
        'id="jw-job-actions"',
    ):
        assert expected in content, expected


@pytest.mark.django_db(transaction=True)
def test_a_job_whose_row_stays_locked_is_skipped_as_busy_and_the_others_are_cancelled(
    admin_client,
):
    """Concurrent work (here another session, in slow motion) holds one job's row past the
    lock timeout: that job is reported as busy and left as it was, the others are cancelled,
    and the page says so; not a 500 halfway through the selection."""
    import psycopg

    waiting = [submitted_job(priority=6) for _ in range(3)]
    held = waiting[1]
    with psycopg.connect(**connection.get_connection_params()) as other:
        other.execute(
            "SELECT 1 FROM jobweaver_scheduler_jobexecution WHERE job_id = %s FOR UPDATE", [held.id]
        )
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '200ms'")
        try:
            response = admin_client.post(
                bulk_url("cancel", priority=6), {"confirm": "yes"}, follow=True
            )
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")

    assert response.status_code == 200
    assert [execution_of(job.id).status for job in waiting] == [
        "CANCELLED",
        "PENDING",
        "CANCELLED",
    ]
    shown = shown_messages(response)
    assert "Cancelled 2 jobs; a running job stops at its next checkpoint." in shown
    assert any(
        m.startswith("Skipped 1 job: 1 x job was busy") and str(held.id) in m for m in shown
    ), shown
    summary = LogEntry.objects.filter(object_id=None).latest("action_time")
    assert summary.change_message.startswith("Cancel: 2 cancelled, 1 skipped (1 job was busy")
