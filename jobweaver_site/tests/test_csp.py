"""The reference site's Content-Security-Policy (§17, django-csp): admin and dashboard pages
send it; scripts come from this origin or carry the response's nonce, never 'unsafe-inline'."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

ADMIN_PAGES = [
    reverse("admin:index"),
    reverse("admin:jobweaver_jobs_job_changelist"),
    reverse("admin:jobweaver_jobs_job_submit"),
    reverse("admin:jobweaver_workflows_workflow_changelist"),
    reverse("jobweaver-dead-letters"),
    reverse("jobweaver-dashboard"),
]


def policy(response) -> dict[str, list[str]]:
    header = response.headers["Content-Security-Policy"]
    return {
        name: sources
        for name, *sources in (part.split() for part in header.split(";") if part.strip())
    }


def script_tags(response) -> list[str]:
    return re.findall(r"<script\b[^>]*>", response.content.decode())


def assert_strict(directives: dict[str, list[str]]) -> None:
    assert directives["default-src"] == ["'self'"]
    assert "'unsafe-inline'" not in directives["script-src"]
    assert "'unsafe-eval'" not in directives["script-src"]
    assert directives["object-src"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"]


def test_the_admin_login_page_sends_the_policy(client):
    response = client.get(reverse("admin:login"))

    assert response.status_code == 200
    assert_strict(policy(response))


@pytest.mark.parametrize("path", ADMIN_PAGES)
def test_admin_and_dashboard_pages_send_the_policy_and_no_inline_script(admin_client, path):
    response = admin_client.get(path)

    assert response.status_code == 200
    directives = policy(response)
    assert_strict(directives)
    nonces = [source for source in directives["script-src"] if source.startswith("'nonce-")]
    for tag in script_tags(response):
        # A file of this origin, or inline with this response's nonce.
        assert re.search(r'\bsrc="/', tag) or any(f'nonce="{n[7:-1]}"' in tag for n in nonces)


def test_the_dashboard_scripts_carry_the_nonce_the_header_names(admin_client):
    first = admin_client.get(reverse("jobweaver-dashboard"))
    second = admin_client.get(reverse("jobweaver-dashboard"))

    nonces = []
    for response in (first, second):
        (nonce,) = [s for s in policy(response)["script-src"] if s.startswith("'nonce-")]
        nonce = nonce.removeprefix("'nonce-").removesuffix("'")
        ours = [tag for tag in script_tags(response) if "/static/dashboard/" in tag]
        assert ours, "the dashboard loads its script"
        assert all(f'nonce="{nonce}"' in tag for tag in ours)
        nonces.append(nonce)
    assert nonces[0] != nonces[1]  # one per response


def test_swagger_ui_runs_no_inline_script(client):
    response = client.get("/api/docs/")

    assert response.status_code == 200
    assert_strict(policy(response))
    tags = script_tags(response)
    assert tags and all(re.search(r'\bsrc="/', tag) for tag in tags)
    # Its start-up script is a file of its own (drf-spectacular's split view).
    (start,) = [tag for tag in tags if "?script" in tag]
    source = re.search(r'src="([^"]+)"', start).group(1).replace("&amp;", "&")
    started = client.get(source)
    assert started.status_code == 200 and b"SwaggerUIBundle" in started.content
