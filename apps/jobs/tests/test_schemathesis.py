"""The live API against its own OpenAPI schema (schemathesis over the WSGI app, real
PostgreSQL): every operation, bounded generated examples, authenticated as a user who may do
everything. No response is a 5xx, and every response conforms to the schema: documented status
code, content type, headers and body."""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from jobweaver.accounts.tests.helpers import SUBMITTER, make_user, token_for

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application())


@pytest.fixture
def in_test_transaction():
    """Requests through the WSGI app share the test's connection (and its transaction): do not
    let the end of each request close it, as Django's test client also arranges."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def token(db, settings, in_test_transaction):
    # Generated examples are many submissions: keep the fairness limits out of their way here
    # (they have tests of their own) so the run reaches the operations behind them.
    settings.JOBWEAVER_SUBMIT_THROTTLE_RATE = 1_000_000
    settings.JOBWEAVER_MAX_ACTIVE_JOBS_PER_USER = 1_000_000
    user = make_user(
        "schemathesis",
        *SUBMITTER,
        "jobweaver_jobs.submit_high_priority",
        "jobweaver_jobs.view_all_jobs",
        "jobweaver_scheduler.change_pause",
        "jobweaver_scheduler.change_concurrencylimit",
    )
    return token_for(user)


@schema.parametrize()
@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_operation_conforms_and_never_fails_on_the_server(case, token):
    case.call_and_validate(headers={"Authorization": f"Token {token}"}, checks=CHECKS)
