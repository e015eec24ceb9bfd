"""The OpenAPI schema at /api/schema/ and Swagger UI at /api/docs/: served by the project (no
CDN), public, valid, and describing every operation with its body and its errors."""

import pytest
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = pytest.mark.django_db


def api_operations(schema: dict) -> set[tuple[str, str]]:
    return {
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        for method in operations
        if method in ("get", "post", "put", "patch", "delete")
    }


def api_routes() -> set[str]:
    """Every route of apps/jobs/api/urls.py, as an OpenAPI path."""
    (api,) = [
        p
        for p in get_resolver().url_patterns
        if isinstance(p, URLResolver) and str(p.pattern) == "api/"
    ]
    routes = set()
    for pattern in api.url_patterns:
        assert isinstance(pattern, URLPattern)
        route = "/api/" + str(pattern.pattern).replace("<str:job_id>", "{job_id}")
        routes.add(route)
    return routes


def test_the_schema_is_openapi_3_and_describes_every_operation(client):
    response = client.get("/api/schema/?format=json")

    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert set(schema["paths"]) == api_routes()
    expected = {
        ("GET", "/api/jobs"), ("POST", "/api/jobs"), ("POST", "/api/jobs/batch"),
        ("GET", "/api/jobs/{job_id}"), ("GET", "/api/jobs/{job_id}/attempts"),
        ("POST", "/api/jobs/{job_id}/retry"), ("POST", "/api/jobs/{job_id}/cancel"),
        ("GET", "/api/stats"),
    }  # fmt: skip
    assert api_operations(schema) == expected
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            for status in ("400", "401", "403", "429", "500"):
                assert responses[status]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/Error"
                }, (method, path, status)
            if method == "post" and "{job_id}" not in path:
                assert "requestBody" in operation, (method, path)
    submit = schema["paths"]["/api/jobs"]["post"]["responses"]
    assert {"202", "200", "409", "413"} <= set(submit)
    assert set(submit["202"]["headers"]) == {"Location", "X-Trace-Id"}
    assert "oneOf" in schema["components"]["schemas"]["Step"]


def test_swagger_ui_is_served_from_our_own_static_files(client):
    response = client.get("/api/docs/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "swagger-ui" in page
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in page
    assert "cdn" not in page.lower()


def test_the_schema_generates_without_warnings_and_validates(tmp_path):
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml")
    )
    assert "openapi: 3" in (tmp_path / "schema.yaml").read_text()
