"""Probes answer without authentication; readiness really checks PostgreSQL and Kafka, and tells
operators only what it knows of the platform (§17)."""

import threading

import pytest
from django.db import connection
from django.test import Client

from jobweaver.accounts.tests.helpers import make_user
from jobweaver_site import health


@pytest.mark.django_db
def test_healthz_needs_no_auth(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_reports_postgresql_and_kafka_and_the_platform_to_operators_only(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "postgresql": True, "kafka": True}

    client.force_login(make_user("probe-operator", "jobweaver_jobs.view_all_jobs"))
    assert client.get("/readyz").json() == {
        "status": "ok",
        "postgresql": True,
        "kafka": True,
        "liveExecutors": 0,  # no worker runs in this test
        "warnings": ["no live executor: jobs wait in PostgreSQL"],
        "queuesWithoutExecutor": [],  # and no job waits
    }
    client.force_login(make_user("probe-submitter", "jobweaver_jobs.view_job"))
    assert "liveExecutors" not in client.get("/readyz").json()


@pytest.mark.django_db
def test_readyz_is_503_when_kafka_is_unreachable(client, settings):
    settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS = "127.0.0.1:1"
    settings.JOBWEAVER_READYZ_KAFKA_CACHE_SECONDS = 0  # no probe result from an earlier test
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["kafka"] is False


@pytest.mark.django_db(transaction=True)
def test_readyz_probes_kafka_once_per_cache_period_even_under_concurrent_calls(
    settings, monkeypatch
):
    settings.JOBWEAVER_READYZ_KAFKA_CACHE_SECONDS = 3600
    monkeypatch.setattr(health, "_kafka_probe", None)
    probes: list[float] = []

    def probe(timeout: float) -> bool:
        probes.append(timeout)
        return True

    monkeypatch.setattr(health, "broker_reachable", probe)
    statuses: list[int] = []

    def call():
        try:
            statuses.append(Client().get("/readyz").status_code)
        finally:
            connection.close()  # this thread's own connection

    threads = [threading.Thread(target=call) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert statuses == [200] * 10
    assert probes == [settings.JOBWEAVER_READYZ_KAFKA_TIMEOUT_SECONDS]
    assert settings.JOBWEAVER_READYZ_KAFKA_TIMEOUT_SECONDS <= 2


@pytest.mark.django_db
def test_probes_answer_plain_http_when_https_is_enforced(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/healthz").status_code == 200
    assert client.get("/api/jobs").status_code == 301  # everything else goes to https
