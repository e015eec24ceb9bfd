"""A worker's metrics listener (apps/core/metrics.py `serve`) is not public (§17): it binds
127.0.0.1 unless told otherwise, and answers only the bearer token (401 without it, 404 for
every request while no token is set)."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from jobweaver.core import metrics
from tests.stack import free_port


@pytest.fixture
def listener():
    servers = []

    def start(**options):
        server = metrics.serve(free_port(), **options)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def get(server, authorization: str | None = None) -> tuple[int, str]:
    host, port = server.server_address[:2]
    request = urllib.request.Request(f"http://{host}:{port}/metrics")
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_the_listener_binds_loopback_by_default_and_needs_the_token(listener):
    server = listener(token="s3cret")

    assert server.server_address[0] == "127.0.0.1"
    assert get(server)[0] == 401
    assert get(server, "Bearer wrong")[0] == 401
    assert get(server, "s3cret")[0] == 401
    status, body = get(server, "Bearer s3cret")
    assert status == 200
    assert "jobweaver_jobs_submitted_total" in body or "jobweaver_jobs_submitted" in body


def test_without_a_token_the_listener_answers_404(listener):
    server = listener()

    assert get(server)[0] == 404
    assert get(server, "Bearer ")[0] == 404


def test_the_address_is_a_setting(listener):
    server = listener(bind="0.0.0.0", token="t")

    assert server.server_address[0] == "0.0.0.0"


def test_port_zero_serves_nothing():
    assert metrics.serve(0, token="t") is None
