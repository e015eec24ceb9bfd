"""The admin's answer when the database gives up on a statement: a page that says what
happened, not a 500.

Every admin page that writes (a pause, a limit, a schedule, a job's Retry button, the
dashboard's Resume) is one transaction. A statement that waits out the lock timeout for a row
held by concurrent work, or that PostgreSQL cancels at the statement timeout, rolls that
transaction back: nothing was changed, and the operator's next step is to try again, as the
API's 429 and the commands' exit 1 say (jobweaver.core.db). Bulk actions skip a busy job and go on
(apps/jobs/operations.py); this covers every other page of the admin.
"""

from __future__ import annotations

import logging

from django.contrib import admin
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from jobweaver.conf import settings
from jobweaver.core.db import lock_timed_out, statement_cancelled

logger = logging.getLogger(__name__)

# As the API's 429 (apps/jobs/api/errors.py): a lock is usually held for milliseconds.
BUSY_RETRY_AFTER_SECONDS = 1


class DatabaseGaveUpMiddleware:
    """Admin pages only: the API answers with its own error body, the commands with a line."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception):
        if not request.path.startswith(reverse("admin:index")):
            return None
        if lock_timed_out(exception):
            status, headers = 429, {"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)}
            title = "Busy: nothing was changed"
            reason = (
                "A row this page needed stayed locked by concurrent work for longer than "
                f"{settings.JOBWEAVER_DB_LOCK_TIMEOUT_SECONDS:g} s "
                "(JOBWEAVER_DB_LOCK_TIMEOUT_SECONDS), so the database gave up waiting and "
                "rolled the change back. Try again in a moment."
            )
        elif statement_cancelled(exception):
            status, headers = 503, {}
            title = "Cancelled by the database: nothing was changed"
            reason = (
                "The database cancelled a statement of this page that ran longer than "
                f"{settings.JOBWEAVER_DB_STATEMENT_TIMEOUT_SECONDS:g} s "
                "(JOBWEAVER_DB_STATEMENT_TIMEOUT_SECONDS), or an operator cancelled it, and "
                "rolled the change back."
            )
        else:
            return None
        logger.warning("admin %s %s: %s (%s)", request.method, request.path, title, exception)
        # The page is the admin's own: its header and menu need a query (the user's
        # permissions), which a transaction still open around the view could not run.
        context = {} if connection.in_atomic_block else admin.site.each_context(request)
        response = TemplateResponse(
            request,
            "dashboard/database_gave_up.html",
            {**context, "title": title, "reason": reason, "back_url": request.path},
            status=status,
            headers=headers,
        )
        return response.render()
