"""API tokens: stored hashed, named, revocable, expiring, last-used; shown once by
`create_api_token`; never shown by the admin; the session keeps CSRF."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone
from rest_framework.test import APIClient

from jobweaver.accounts.management.commands.create_api_token import Command as CreateApiToken
from jobweaver.accounts.models import ApiToken
from jobweaver.accounts.services import api_token_create, api_token_rotate, api_tokens_revoke
from jobweaver.accounts.tests.helpers import SUBMITTER, make_user
from jobweaver.jobs.tests.api_helpers import assert_error_body

pytestmark = pytest.mark.django_db


def client_with(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_only_a_hash_of_the_key_is_stored():
    created = api_token_create(user=make_user("alice"), name="laptop")

    row = ApiToken.objects.get()
    assert row.key_hash == hashlib.sha256(created.key.encode()).hexdigest()
    stored = [str(value) for value in ApiToken.objects.values_list().get()]
    assert all(created.key not in value for value in stored)
    assert created.key.startswith(row.prefix) and len(row.prefix) < len(created.key) // 3


def test_a_token_authenticates_and_records_its_last_use():
    user = make_user("alice", *SUBMITTER)
    created = api_token_create(user=user, name="ci")
    assert created.token.last_used_at is None

    assert client_with(created.key).get("/api/jobs").status_code == 200

    assert ApiToken.objects.get().last_used_at is not None


@pytest.mark.parametrize("state", ["revoked", "expired", "inactive user", "unknown"])
def test_revoked_expired_inactive_or_unknown_tokens_get_401(state):
    user = make_user("alice", *SUBMITTER)
    key = api_token_create(user=user, name="ci").key
    if state == "revoked":
        api_tokens_revoke(token_ids=[ApiToken.objects.get().pk])
    elif state == "expired":
        ApiToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    elif state == "inactive user":
        user.is_active = False
        user.save()
    else:
        key = key[:-4] + "AAAA"
    assert_error_body(client_with(key).get("/api/jobs"), 401, "API.UNAUTHENTICATED")


def test_names_are_unique_among_live_tokens_and_rotation_replaces_the_key():
    user = make_user("alice", *SUBMITTER)
    first = api_token_create(user=user, name="deploy")
    with pytest.raises(Exception, match="already has a token named"):
        api_token_create(user=user, name="deploy")

    second = api_token_rotate(user=user, name="deploy")

    assert client_with(first.key).get("/api/jobs").status_code == 401
    assert client_with(second.key).get("/api/jobs").status_code == 200


def test_create_api_token_prints_the_key_once(run_command):
    make_user("alice", *SUBMITTER)

    result = run_command(
        CreateApiToken, "create_api_token", "alice", "--name", "cli", "--expires-in-days", "30"
    )

    assert result.code == 0, result.err
    key = result.out.strip()
    assert client_with(key).get("/api/jobs").status_code == 200
    token = ApiToken.objects.get()
    assert token.name == "cli"
    assert timedelta(days=29) < token.expires_at - timezone.now() <= timedelta(days=30)
    assert "only time" in result.err


def days_left(token: ApiToken) -> float:
    return (token.expires_at - timezone.now()) / timedelta(days=1)


def test_a_token_expires_after_the_default_days_unless_created_otherwise(settings):
    user = make_user("alice", *SUBMITTER)
    settings.JOBWEAVER_API_TOKEN_DEFAULT_DAYS = 90

    default = api_token_create(user=user, name="default").token
    never = api_token_create(user=user, name="never", expires_at=None).token
    chosen_at = timezone.now() + timedelta(days=7)
    chosen = api_token_create(user=user, name="chosen", expires_at=chosen_at).token
    rotated = api_token_rotate(user=user, name="never").token

    assert 89.99 < days_left(default) <= 90
    assert never.expires_at is None
    assert chosen.expires_at == chosen_at
    assert 89.99 < days_left(rotated) <= 90  # a rotated key gets the default again


def test_a_default_of_0_days_means_tokens_never_expire(settings):
    settings.JOBWEAVER_API_TOKEN_DEFAULT_DAYS = 0

    assert api_token_create(user=make_user("alice"), name="ci").token.expires_at is None


@pytest.mark.parametrize(
    ("args", "days"), [([], 90.0), (["--expires-in-days", "2.5"], 2.5), (["--no-expiry"], None)]
)
def test_create_api_token_expires_by_default_unless_told(run_command, settings, args, days):
    settings.JOBWEAVER_API_TOKEN_DEFAULT_DAYS = 90
    make_user("alice", *SUBMITTER)

    result = run_command(CreateApiToken, "create_api_token", "alice", "--name", "cli", *args)

    assert result.code == 0, result.err
    token = ApiToken.objects.get()
    if days is None:
        assert token.expires_at is None
        assert "never expires" in result.err
    else:
        assert days - 0.01 < days_left(token) <= days
        assert f"expires {token.expires_at:%Y-%m-%d}" in result.err


@pytest.mark.parametrize(
    "args, reason",
    [(["nobody", "--name", "x"], "unknown user"), (["alice"], "--name"),
     (["alice", "--name", "x", "--expires-in-days", "0"], "--expires-in-days"),
     (["alice", "--name", "x", "--expires-in-days", "3", "--no-expiry"], "not allowed with")],
)  # fmt: skip
def test_create_api_token_refuses_bad_input(run_command, args, reason):
    make_user("alice")
    result = run_command(CreateApiToken, "create_api_token", *args)
    assert result.code == 2
    assert reason in result.err
    assert ApiToken.objects.count() == 0


def test_create_api_token_help_runs():
    with pytest.raises(SystemExit) as exit_info:
        call_command("create_api_token", "--help")
    assert exit_info.value.code == 0


def test_the_admin_lists_tokens_but_never_a_key_and_cannot_add_one(client):
    admin = make_user("root", is_staff=True, is_superuser=True)
    key = api_token_create(user=admin, name="shown-never").key
    client.force_login(admin)

    listing = client.get("/admin/jobweaver_accounts/apitoken/").content.decode()
    detail = client.get(f"/admin/jobweaver_accounts/apitoken/{ApiToken.objects.get().pk}/change/")

    assert "shown-never" in listing
    for page in (listing, detail.content.decode()):
        assert key not in page
        assert ApiToken.objects.get().key_hash not in page
    assert client.get("/admin/jobweaver_accounts/apitoken/add/").status_code == 403


def test_the_admin_revokes_tokens(client):
    admin = make_user("root", is_staff=True, is_superuser=True)
    key = api_token_create(user=admin, name="to-revoke").key
    client.force_login(admin)

    client.post(
        "/admin/jobweaver_accounts/apitoken/",
        {"action": "revoke", "_selected_action": [ApiToken.objects.get().pk]},
    )

    assert ApiToken.objects.get().revoked_at is not None
    assert client_with(key).get("/api/jobs").status_code == 401


def test_session_authentication_enforces_csrf():
    user = make_user("alice", *SUBMITTER)
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)
    body = '{"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}'

    refused = client.post("/api/jobs", body, content_type="application/json")
    assert_error_body(refused, 403, "API.FORBIDDEN")
    assert "CSRF" in refused.json()["message"]

    client.get("/admin/login/")  # sets the CSRF cookie
    token = client.cookies["csrftoken"].value
    accepted = client.post(
        "/api/jobs", body, content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert accepted.status_code == 202, accepted.content


def test_password_validators_are_on():
    user = make_user("alice")
    for weak in ("short", "password1234", "12345678901234", "alice-alice"):
        with pytest.raises(ValidationError):
            validate_password(weak, user)
    validate_password("a long and unusual passphrase", user)


def test_create_api_token_from_code_raises_command_error():
    with pytest.raises(CommandError):
        call_command("create_api_token", "nobody", "--name", "x")
