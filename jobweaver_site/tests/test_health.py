"""Probes answer without authentication; readiness really checks PostgreSQL and Kafka."""

import pytest


@pytest.mark.django_db
def test_healthz_needs_no_auth(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_reports_postgresql_and_kafka(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "postgresql": True,
        "kafka": True,
        "liveExecutors": 0,  # no worker runs in this test
        "warnings": ["no live executor: jobs wait in PostgreSQL"],
    }


@pytest.mark.django_db
def test_readyz_is_503_when_kafka_is_unreachable(client, settings):
    settings.KAFKA_BOOTSTRAP_SERVERS = "127.0.0.1:1"
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["kafka"] is False
