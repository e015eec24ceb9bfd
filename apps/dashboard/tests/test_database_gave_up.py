"""An admin page whose statement the database gave up on (the lock timeout, the statement
timeout) answers with the admin's page saying nothing was changed, not a 500.

Another session plays the concurrent work, in slow motion: it holds what the page's
transaction needs past a lock timeout of 200 ms (or a statement timeout of 200 ms)."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import OperationalError
from django.urls import reverse

from jobweaver.engine.claim import DISPATCH_LOCK_KEY
from jobweaver.scheduler.models import ConcurrencyLimit, Pause
from jobweaver.scheduler.services import concurrency_limit_set
from tests.sessions import held_by_another_session

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_pause_that_waits_out_the_lock_timeout_is_a_busy_page_and_nothing_changes(
    admin_client,
):
    # Adding a pause takes the dispatch lock; a dispatch holds it past the lock timeout.
    with held_by_another_session(
        "SELECT pg_advisory_lock(%s)", [DISPATCH_LOCK_KEY], settings=["lock_timeout = '200ms'"]
    ):
        response = admin_client.post(
            reverse("admin:jobweaver_scheduler_pause_add"),
            {"scope": "QUEUE", "name": "imports", "reason": "vendor outage"},
        )

    assert response.status_code == 429
    assert response["Retry-After"] == "1"
    page = response.content.decode()
    assert "Busy: nothing was changed" in page
    assert "stayed locked by concurrent work for longer than" in page
    assert "JOBWEAVER_DB_LOCK_TIMEOUT_SECONDS" in page
    assert reverse("admin:logout") in page  # the admin's own page, its menu included
    assert not Pause.objects.exists()
    # Once the lock is free, the same request goes through.
    again = admin_client.post(
        reverse("admin:jobweaver_scheduler_pause_add"),
        {"scope": "QUEUE", "name": "imports", "reason": "vendor outage"},
    )
    assert again.status_code == 302
    assert Pause.objects.get().name == "imports"


def test_a_limit_change_cancelled_at_the_statement_timeout_says_so_and_nothing_changes(
    admin_client,
):
    limit, _ = concurrency_limit_set(pattern="customer-*", max_running=2, max_per_second=None)
    change = reverse("admin:jobweaver_scheduler_concurrencylimit_change", args=[limit.pk])

    with held_by_another_session(
        "SELECT 1 FROM jobweaver_scheduler_concurrencylimit WHERE id = %s FOR UPDATE",
        [limit.pk],
        settings=["lock_timeout = 0", "statement_timeout = '200ms'"],
    ):
        response = admin_client.post(change, {"max_running": "5", "max_per_second": ""})

    assert response.status_code == 503
    page = response.content.decode()
    assert "Cancelled by the database: nothing was changed" in page
    assert "JOBWEAVER_DB_STATEMENT_TIMEOUT_SECONDS" in page
    assert ConcurrencyLimit.objects.get(pk=limit.pk).max_running == 2


def test_other_database_errors_of_an_admin_page_are_not_dressed_up(admin_client):
    """Only the two timeouts get the page: any other database error is still a server error
    (the test client re-raises it, as Django would log it with its traceback)."""
    with (
        mock.patch(
            "jobweaver.scheduler.admin.concurrency_limit_set",
            side_effect=OperationalError("server closed the connection unexpectedly"),
        ),
        pytest.raises(OperationalError),
    ):
        admin_client.post(
            reverse("admin:jobweaver_scheduler_concurrencylimit_add"),
            {"pattern": "tenant-*", "max_running": "1", "max_per_second": ""},
        )
