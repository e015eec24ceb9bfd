"""The web's /metrics (§17): it always needs the bearer token (404 while none is set), it sits
behind the ALLOWED_HOSTS check, and a scrape reads Kafka's consumer lag at most once per
JOBWEAVER_METRICS_KAFKA_CACHE_SECONDS."""

from __future__ import annotations

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from jobweaver.scheduler import metrics as cluster_metrics

TOKEN = "web-metrics-token"
pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def token(settings):
    settings.JOBWEAVER_METRICS_TOKEN = TOKEN


def scrape(client: Client, **headers):
    return client.get("/metrics", headers=headers)


def source_up(response) -> dict[str, float]:
    return {
        sample.labels["source"]: sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
        if sample.name == "jobweaver_metrics_source_up"
    }


def test_metrics_need_the_bearer_token(client):
    assert scrape(client).status_code == 401
    assert scrape(client, Authorization="Bearer wrong").status_code == 401
    assert scrape(client, Authorization=TOKEN).status_code == 401

    response = scrape(client, Authorization=f"Bearer {TOKEN}")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert "jobweaver_jobs{" in response.content.decode()


def test_without_a_token_configured_metrics_answer_404(client, settings):
    settings.JOBWEAVER_METRICS_TOKEN = ""

    assert scrape(client).status_code == 404
    assert scrape(client, Authorization="Bearer ").status_code == 404


def test_a_host_that_is_not_allowed_gets_400_not_metrics(settings):
    settings.ALLOWED_HOSTS = ["jobs.example.com"]
    client = Client()

    refused = client.get(
        "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, HTTP_HOST="10.1.2.3:8000"
    )
    allowed = client.get(
        "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, HTTP_HOST="jobs.example.com"
    )

    assert refused.status_code == 400
    assert b"jobweaver_" not in refused.content
    assert allowed.status_code == 200


def test_plain_http_scrapes_are_not_redirected(client, settings):
    settings.SECURE_SSL_REDIRECT = True

    assert scrape(client, Authorization=f"Bearer {TOKEN}").status_code == 200
    assert client.get("/admin/login/").status_code == 301  # the rest of the site is


def test_a_scrape_reads_kafka_lag_once_per_cache_period(client, settings, monkeypatch):
    monkeypatch.setattr(cluster_metrics, "_lag_reading", None)
    settings.JOBWEAVER_METRICS_KAFKA_CACHE_SECONDS = 3600
    authorization = {"Authorization": f"Bearer {TOKEN}"}
    assert source_up(scrape(client, **authorization))["kafka"] == 1

    # Kafka is now unreachable: within the period, scrapes reuse the reading and open no client
    # (one would fail: see the last scrape).
    settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS = "127.0.0.1:1"
    assert source_up(scrape(client, **authorization))["kafka"] == 1

    settings.JOBWEAVER_METRICS_KAFKA_CACHE_SECONDS = 0
    assert source_up(scrape(client, **authorization))["kafka"] == 0
