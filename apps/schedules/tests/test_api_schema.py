"""/api/schedules in the OpenAPI schema: every operation described, with its body and the API's
error body; and the live operations against it (schemathesis, as a user who may manage
schedules, so generated requests reach past the permission check)."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings

from jobweaver.accounts.tests.helpers import make_user, token_for
from jobweaver.jobs.tests.test_schemathesis import CHECKS, in_test_transaction  # noqa: F401
from jobweaver.schedules.tests.test_api import MANAGER

OPERATIONS = {
    ("GET", "/api/schedules"),
    ("POST", "/api/schedules"),
    ("GET", "/api/schedules/{name}"),
    ("PATCH", "/api/schedules/{name}"),
    ("DELETE", "/api/schedules/{name}"),
    ("POST", "/api/schedules/{name}/pause"),
    ("POST", "/api/schedules/{name}/resume"),
}


@pytest.mark.django_db
def test_every_schedule_operation_is_described_with_its_errors(client):
    schema = client.get("/api/schema/?format=json").json()

    paths = {
        path: ops for path, ops in schema["paths"].items() if path.startswith("/api/schedules")
    }
    assert {(method.upper(), path) for path, ops in paths.items() for method in ops} == OPERATIONS
    for path, operations in paths.items():
        for method, operation in operations.items():
            for status in ("400", "401", "403", "429", "500"):
                content = operation["responses"][status]["content"]["application/json"]
                assert content["schema"] == {"$ref": "#/components/schemas/Error"}, (method, path)
            if "{name}" in path:
                assert "404" in operation["responses"], (method, path)
    assert "requestBody" in paths["/api/schedules"]["post"]
    assert "requestBody" in paths["/api/schedules/{name}"]["patch"]
    assert set(paths["/api/schedules"]["post"]["responses"]["201"]["headers"]) == {"Location"}
    template = schema["components"]["schemas"]["ScheduleTemplate"]
    assert "runAt" not in template["properties"] and "jobType" in template["properties"]


api_schema = schemathesis.openapi.from_wsgi(
    "/api/schema/?format=json", get_wsgi_application()
).include(path_regex="^/api/schedules")


@pytest.fixture
def token(db, in_test_transaction):  # noqa: F811
    return token_for(make_user("schedules-schemathesis", *MANAGER))


@api_schema.parametrize()
@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_schedule_operation_conforms_and_never_fails_on_the_server(case, token):
    case.call_and_validate(headers={"Authorization": f"Token {token}"}, checks=CHECKS)
