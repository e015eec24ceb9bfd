"""Admin logins are throttled per (username, IP) with a cool-off (§17), by django-axes as the
reference site configures it: after JOBWEAVER_LOGIN_FAILURE_LIMIT (5) failures that username
from that address is refused, even with the right password, while another address or another
username still logs in; after the cool-off it logs in again."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.conf import settings as site_settings
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db
PASSWORD = "the-right-password"


@pytest.fixture(autouse=True)
def staff(settings):
    # A fast hasher: each failed login checks a password, and the cool-off is timed.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    for username in ("ops", "other"):
        get_user_model().objects.create_user(username, password=PASSWORD, is_staff=True)


def login(username: str, password: str, ip: str) -> tuple[int, Client]:
    client = Client(REMOTE_ADDR=ip)
    response = client.post(
        "/admin/login/?next=/admin/", {"username": username, "password": password}
    )
    return response.status_code, client


def logged_in(client: Client) -> bool:
    return client.get("/admin/").status_code == 200


def test_the_site_locks_a_username_and_address_out_after_five_failures(settings):
    assert site_settings.AXES_FAILURE_LIMIT == 5
    assert site_settings.AXES_COOLOFF_TIME.total_seconds() == 15 * 60
    assert site_settings.AXES_LOCKOUT_PARAMETERS == [["username", "ip_address"]]

    for _ in range(4):
        status, _ = login("ops", "wrong", "203.0.113.7")
        assert status == 200  # the form again, with its error
    assert login("ops", "wrong", "203.0.113.7")[0] == 429  # the fifth locks out

    status, client = login("ops", PASSWORD, "203.0.113.7")
    assert status == 429
    assert not logged_in(client)

    # Another address, or another username from the same address, is not locked out.
    status, client = login("ops", PASSWORD, "198.51.100.9")
    assert status == 302 and logged_in(client)
    status, client = login("other", PASSWORD, "203.0.113.7")
    assert status == 302 and logged_in(client)

    # After the cool-off (shrunk here) the locked pair logs in again.
    settings.AXES_COOLOFF_TIME = timedelta(seconds=0.2)
    time.sleep(0.3)
    status, client = login("ops", PASSWORD, "203.0.113.7")
    assert status == 302 and logged_in(client)


def test_fewer_failures_than_the_limit_do_not_lock_and_a_success_clears_them():
    for _ in range(4):
        login("ops", "wrong", "203.0.113.7")
    assert login("ops", PASSWORD, "203.0.113.7")[0] == 302

    for _ in range(4):  # counted afresh after the success
        login("ops", "wrong", "203.0.113.7")
    status, client = login("ops", PASSWORD, "203.0.113.7")
    assert status == 302 and logged_in(client)
