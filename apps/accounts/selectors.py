"""Reads about users that the API needs on every request.

`missing_permissions` answers what `user.has_perms` answers, in one statement per user object
(the permissions held are kept on it, as Django's backend keeps them). Django's
ModelBackend loads the user's own permissions, then their groups' (two ORM queries on a user
object that lives for one request), on every API request; one statement costs a fraction of
that (bench/NOTES.md). Its answer is the backend's: an inactive user holds nothing, a
superuser everything, anyone else a permission given to them or to one of their groups. With
any other authentication backend that answers permissions configured, it asks Django instead,
since that backend may grant more; a backend without `has_perm` (django-axes' login throttle)
grants nothing, and Django does not ask it either.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.utils.module_loading import import_string

from jobweaver.conf import settings

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
CACHE_ATTRIBUTE = "_jobweaver_permissions"


def missing_permissions(user, perms: Iterable[str]) -> list[str]:
    """The permissions of `perms` ("app_label.codename") that `user` does not hold, in their
    order; empty when it holds them all."""
    perms = list(perms)
    if not perms:
        return []
    if _permission_backends(tuple(settings.AUTHENTICATION_BACKENDS)) != (MODEL_BACKEND,):
        return [perm for perm in perms if not user.has_perm(perm)]
    if not user.is_active:
        return perms
    if user.is_superuser:
        return []
    held = _held_permissions(user)
    return [perm for perm in perms if perm not in held]


def _held_permissions(user) -> frozenset[str]:
    """Every permission `user` holds, read once per user object, as Django's backend caches
    them: a request asks two or three times (its operation, its throttle), a user object lives
    for one request."""
    held = getattr(user, CACHE_ATTRIBUTE, None)
    if held is None:
        with connection.cursor() as cursor:
            cursor.execute(held_permissions_sql("%(user)s"), {"user": user.pk})
            held = remember_held_permissions(user, [row[0] for row in cursor.fetchall()])
    return held


def remember_held_permissions(user, held: Iterable[str]) -> frozenset[str]:
    """Keep on `user` the permissions it holds, read with it by a statement of
    `held_permissions_sql` (the API token's), so no ask on this user object reads them again."""
    held = frozenset(held)
    setattr(user, CACHE_ATTRIBUTE, held)
    return held


@functools.cache
def _permission_backends(backends: tuple[str, ...]) -> tuple[str, ...]:
    """The backends Django asks about permissions: those with `has_perm`
    (django.contrib.auth.models._user_has_perm)."""
    return tuple(path for path in backends if hasattr(import_string(path), "has_perm"))


def holds(user, perm: str) -> bool:
    """Whether `user` holds the permission "app_label.codename" (`user.has_perm`, one statement)."""
    return not missing_permissions(user, [perm])


@functools.cache
def held_permissions_sql(user_id: str) -> str:
    """A query of the permissions ("app_label.codename") the user whose id is the SQL
    expression `user_id` (a parameter, or a column of an outer query) holds itself or through
    a group. The permission table holds a few hundred rows: reading it whole costs less than
    planning around it."""
    users = get_user_model()
    own = users._meta.get_field("user_permissions")  # user -> permission
    membership = users._meta.get_field("groups")  # user -> group
    granted = Group._meta.get_field("permissions")  # group -> permission
    return f"""
        SELECT ct.app_label || '.' || p.codename
        FROM {Permission._meta.db_table} p
        JOIN {ContentType._meta.db_table} ct ON ct.id = p.content_type_id
        WHERE (
            EXISTS (
              SELECT 1 FROM {own.m2m_db_table()} up
              WHERE up.{own.m2m_column_name()} = {user_id}
                AND up.{own.m2m_reverse_name()} = p.id
            )
            OR EXISTS (
              SELECT 1 FROM {membership.m2m_db_table()} ug
              JOIN {granted.m2m_db_table()} gp
                ON gp.{granted.m2m_column_name()} = ug.{membership.m2m_reverse_name()}
              WHERE ug.{membership.m2m_column_name()} = {user_id}
                AND gp.{granted.m2m_reverse_name()} = p.id
            )
          )
    """
