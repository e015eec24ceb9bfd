"""Every admin page answers staff of every role without a server error (§17: "two admin pages
give staff a 500"): each registered model's list, add, change, history and delete pages (GET and
an empty POST), each app's index, and the "view on site" redirect with ids that are not UUIDs,
that exist, and that do not. Real objects of every kind are in the database."""

from __future__ import annotations

import uuid

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.test import Client

from jobweaver.accounts.services import api_token_create
from jobweaver.accounts.tests.helpers import SUBMITTER, make_user
from jobweaver.jobs.models import Job
from jobweaver.scheduler.tests.factories import finished, submitted_job
from jobweaver.schedules.services import schedule_create
from jobweaver.workflows.services import workflow_submit
from jobweaver.workflows.validation import parse_workflow_request

pytestmark = pytest.mark.django_db

LOG = {"jobType": "SIMULATION", "payload": {"steps": [{"action": "LOG", "message": "x"}]}}


def permissions(prefixes: tuple[str, ...] | None) -> tuple[str, ...]:
    """Every permission whose codename starts with one of `prefixes` (None: all of them)."""
    every = Permission.objects.select_related("content_type")
    return tuple(
        f"{p.content_type.app_label}.{p.codename}"
        for p in every
        if prefixes is None or p.codename.startswith(prefixes)
    )


@pytest.fixture
def one_of_everything():
    owner = make_user("owner", *SUBMITTER)
    failed = submitted_job()
    finished(failed.id, "FAILURE", "boom")
    submitted_job()
    workflow_submit(
        spec=parse_workflow_request(
            {
                "name": "wf",
                "jobs": [{"ref": "a", "job": LOG}, {"ref": "b", "job": LOG, "dependsOn": ["a"]}],
            }
        )
    )
    schedule_create(name="hourly", job_template=LOG, interval_seconds=3600, owner=owner)
    api_token_create(user=owner, name="ci")
    return failed


ROLES = {
    "staff only": (),
    "submitter": SUBMITTER,
    "viewer": ("view_",),
    "operator": None,
}


@pytest.mark.parametrize("role", list(ROLES))
def test_no_admin_page_answers_staff_with_a_server_error(role, one_of_everything):
    granted = ROLES[role]
    held = granted if role == "submitter" else permissions(granted)
    client = Client(raise_request_exception=False)
    client.force_login(make_user("staffer", *held, is_staff=True))
    paths = [f"/admin/{label}/" for label in {m._meta.app_label for m in admin.site._registry}]
    for model in admin.site._registry:
        base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        paths += [base, f"{base}add/", f"{base}?q=x", f"{base}not-a-uuid/change/"]
        for pk in model._default_manager.values_list("pk", flat=True)[:2]:
            paths += [f"{base}{pk}/change/", f"{base}{pk}/history/", f"{base}{pk}/delete/"]
    for content_type in ContentType.objects.all():
        for object_id in ("1", "not-a-uuid", uuid.uuid4(), one_of_everything.id):
            paths.append(f"/admin/r/{content_type.pk}/{object_id}/")

    errors = []
    for path in paths:
        for method in (client.get, client.post):
            status = method(path, {}).status_code
            if status >= 500:
                errors.append((method.__name__, path, status))
    assert errors == []


def test_view_on_site_tells_no_existing_object_from_a_missing_one(one_of_everything):
    client = Client()
    client.force_login(make_user("staffer", is_staff=True))
    jobs = ContentType.objects.get_for_model(Job).pk
    existing = client.get(f"/admin/r/{jobs}/{one_of_everything.id}/")
    missing = client.get(f"/admin/r/{jobs}/{uuid.uuid4()}/")
    malformed = client.get(f"/admin/r/{jobs}/not-a-uuid/")
    assert existing.status_code == missing.status_code == malformed.status_code == 404
    assert existing.content == missing.content
