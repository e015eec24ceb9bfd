"""`missing_permissions` (the API's permission check, one statement per user object, none for
a token's user) answers as Django's `user.has_perm` does, for every way a permission is held or
not, and asks Django itself when another authentication backend is configured."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobweaver.accounts.selectors import missing_permissions
from jobweaver.accounts.services import api_token_authenticate, api_token_create
from jobweaver.accounts.tests.helpers import make_user

pytestmark = pytest.mark.django_db

ASKED = [
    "jobweaver_jobs.add_job",
    "jobweaver_jobs.view_all_jobs",
    "jobweaver_jobs.change_job",
    "jobweaver_scheduler.change_pause",
]


def _permission(name: str) -> Permission:
    app_label, codename = name.split(".")
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


def _fresh(user):
    return get_user_model().objects.get(pk=user.pk)  # Django caches permissions per instance


def _django_says(user) -> list[str]:
    user = _fresh(user)
    return [perm for perm in ASKED if not user.has_perm(perm)]


def _users() -> dict[str, object]:
    operators = Group.objects.create(name="operators")
    operators.permissions.add(
        _permission("jobweaver_jobs.view_all_jobs"), _permission("jobweaver_jobs.change_job")
    )
    other_group = Group.objects.create(name="auditors")
    other_group.permissions.add(_permission("jobweaver_scheduler.change_pause"))
    own_and_group = make_user("own-and-group", "jobweaver_jobs.add_job")
    own_and_group.groups.add(operators)
    inactive = make_user("inactive", *ASKED, is_active=False)
    inactive.groups.add(operators)
    return {
        "nothing": make_user("nothing"),
        "own only": make_user("own", "jobweaver_jobs.add_job", "jobweaver_scheduler.change_pause"),
        "group only": _with_group(make_user("grouped"), operators),
        "own and group": own_and_group,
        "inactive": inactive,
        "superuser": make_user("root", is_superuser=True),
        "inactive superuser": make_user("old-root", is_superuser=True, is_active=False),
        "another's group": _with_group(
            make_user("bystander", "jobweaver_jobs.add_job"), other_group
        ),
    }


def _with_group(user, group):
    user.groups.add(group)
    return user


def test_each_user_lacks_what_django_says_it_lacks():
    users = _users()
    make_user("someone-else", *ASKED)  # another user's grants are not this user's

    for name, user in users.items():
        assert missing_permissions(_fresh(user), ASKED) == _django_says(user), name
    # The cases differ: the comparison is not between two empty lists.
    assert missing_permissions(_fresh(users["nothing"]), ASKED) == ASKED
    assert missing_permissions(_fresh(users["own and group"]), ASKED) == [
        "jobweaver_scheduler.change_pause"
    ]
    assert missing_permissions(_fresh(users["superuser"]), ASKED) == []


def test_one_statement_for_any_number_of_permissions_and_of_asks_on_one_user_object():
    user = _fresh(make_user("counted", "jobweaver_jobs.add_job"))

    with CaptureQueriesContext(connection) as queries:
        missing = missing_permissions(user, ASKED)
        again = missing_permissions(user, ["jobweaver_jobs.add_job", "jobweaver_jobs.change_job"])

    assert missing == ASKED[1:]
    assert again == ["jobweaver_jobs.change_job"]
    assert len(queries) == 1  # a request's operation and throttle ask the same user object


def test_a_tokens_user_holds_what_django_says_without_another_statement():
    users = _users()

    for name, user in users.items():
        if not user.is_active:
            continue  # no token authenticates an inactive user
        key = api_token_create(user=user, name="ci").key
        token = api_token_authenticate(key=key)
        with CaptureQueriesContext(connection) as queries:
            missing = missing_permissions(token.user, ASKED)

        assert missing == _django_says(user), name
        assert len(queries) == 0, name  # read with the token: an API request's checks ask next
    assert _django_says(users["own and group"]) == ["jobweaver_scheduler.change_pause"]


def test_a_permission_that_does_not_exist_is_missing():
    user = _fresh(make_user("typo", "jobweaver_jobs.add_job"))

    assert missing_permissions(user, ["jobweaver_jobs.add_jobs", "jobweaver_jobs.add_job"]) == [
        "jobweaver_jobs.add_jobs"
    ]
    assert missing_permissions(user, []) == []


def test_another_backend_is_asked_through_django(settings):
    settings.AUTHENTICATION_BACKENDS = [
        "django.contrib.auth.backends.ModelBackend",
        "jobweaver.accounts.tests.test_permissions.GrantsViewAll",
    ]
    user = _fresh(make_user("elsewhere", "jobweaver_jobs.add_job"))

    assert missing_permissions(user, ASKED) == [
        "jobweaver_jobs.change_job",
        "jobweaver_scheduler.change_pause",
    ]


class GrantsViewAll:
    """An authentication backend that grants one permission to everyone."""

    def authenticate(self, request, **credentials):
        return None

    def has_perm(self, user, perm, obj=None):
        return perm == "jobweaver_jobs.view_all_jobs"
