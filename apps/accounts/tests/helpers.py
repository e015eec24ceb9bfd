"""Users with permissions and tokens, for the tests of every app."""

from __future__ import annotations

import uuid

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from jobweaver.accounts.services import api_token_create

# What a client that submits and manages its own jobs holds (ARCHITECTURE §8).
SUBMITTER = ("jobweaver_jobs.add_job", "jobweaver_jobs.change_job", "jobweaver_jobs.view_job")


def grant(user, *permissions: str):
    """Give `user` these "app_label.codename" permissions; returns the user, fresh from the
    database (Django caches permissions on the instance)."""
    for permission in permissions:
        app_label, codename = permission.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return get_user_model().objects.get(pk=user.pk)


def make_user(username: str | None = None, *permissions: str, **extra):
    username = username or f"user-{uuid.uuid4().hex[:8]}"
    user = get_user_model().objects.create_user(username, password="pw", **extra)
    return grant(user, *permissions)


def token_for(user, name: str = "tests") -> str:
    return api_token_create(user=user, name=name).key
