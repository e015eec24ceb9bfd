"""The OpenAPI schema at /api/schema/ and Swagger UI at /api/docs/: served by the project (no
CDN), public, valid, and describing every operation with its body and its errors."""

import re

import pytest
from django.core.management import call_command
from django.urls import URLPattern

from jobweaver.jobs.api import urls as jobs_api_urls

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
    routes = set()
    for pattern in jobs_api_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        routes.add("/api/" + re.sub(r"<\w+:(\w+)>", r"{\1}", str(pattern.pattern)))
    return routes


def test_the_schema_is_openapi_3_and_describes_every_operation(client):
    response = client.get("/api/schema/?format=json")

    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    # Other apps' routes (e.g. /api/schedules) have tests of their own.
    ours = {path: ops for path, ops in schema["paths"].items() if path in api_routes()}
    assert set(ours) == api_routes()
    expected = {
        ("GET", "/api/jobs"), ("POST", "/api/jobs"), ("POST", "/api/jobs/batch"),
        ("GET", "/api/jobs/{job_id}"), ("GET", "/api/jobs/{job_id}/attempts"),
        ("POST", "/api/jobs/{job_id}/retry"), ("POST", "/api/jobs/{job_id}/cancel"),
        ("GET", "/api/stats"),
        ("GET", "/api/pauses"), ("POST", "/api/pauses"), ("DELETE", "/api/pauses/{scope}/{name}"),
        ("GET", "/api/limits"), ("PUT", "/api/limits/{pattern}"),
        ("DELETE", "/api/limits/{pattern}"),
        ("GET", "/api/queues"), ("PUT", "/api/queues/{name}"),
    }  # fmt: skip
    assert api_operations({"paths": ours}) == expected
    for path, operations in ours.items():
        for method, operation in operations.items():
            responses = operation["responses"]
            for status in ("400", "401", "403", "429", "500"):
                assert responses[status]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/Error"
                }, (method, path, status)
            if method in ("post", "put") and "{job_id}" not in path:
                assert "requestBody" in operation, (method, path)
            if method == "delete":
                assert {"204", "404"} <= set(responses), path
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
    # Every script, style and link is our own, never a CDN's. (A bare "cdn" substring is no
    # test: the page's random CSRF token contains it now and then.)
    addresses = re.findall(r"""(?:src|href|url)\s*[=:]\s*["']([^"']+)["']""", page)
    assert addresses
    assert [a for a in addresses if a.startswith(("http:", "https:", "//"))] == []
    assert not re.search(r"jsdelivr|unpkg|cdnjs|cdn\.", page, re.IGNORECASE)


def test_the_schema_generates_without_warnings_and_validates(tmp_path):
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml")
    )
    assert "openapi: 3" in (tmp_path / "schema.yaml").read_text()


def test_task_jobs_are_in_the_schema_with_the_registered_tasks(client):
    """§17: the schema left TASK jobs out, so the fuzzer (make fuzz) never tried them."""
    components = client.get("/api/schema/?format=json").json()["components"]["schemas"]
    assert "TASK" in components["JobTypeEnum"]["enum"]
    payloads = [ref["$ref"].rsplit("/", 1)[-1] for ref in components["Payload"]["oneOf"]]
    assert payloads == ["SimulationPayload", "TaskPayload"]
    task = components["TaskPayload"]["properties"]["task"]["allOf"][0]["$ref"].rsplit("/", 1)[-1]
    assert "jobweaver_site.examples.tasks.add" in components[task]["enum"]
    assert components["TaskPayload"]["required"] == ["task"]
