"""Creating, checking and revoking API tokens.

A token expires JOBWEAVER_API_TOKEN_DEFAULT_DAYS (90) after its creation unless its creator
chose another expiry, or none (ARCHITECTURE §17): a key that leaked into a CI log or a laptop
stops working by itself. 0 days means tokens never expire unless told to.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, Literal

from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from jobweaver.accounts.models import ApiToken
from jobweaver.accounts.selectors import held_permissions_sql, remember_held_permissions
from jobweaver.conf import settings
from jobweaver.core.errors import InvalidRequest

KEY_PREFIX = "jw_"
SHOWN_PREFIX_CHARS = 10
# last_used_at is a hint for operators, not an audit log: write it at most this often.
LAST_USED_RESOLUTION = timedelta(seconds=60)
# `expires_at=DEFAULT_EXPIRY`: JOBWEAVER_API_TOKEN_DEFAULT_DAYS from now (None: never expires).
DEFAULT_EXPIRY: Final = "default"


@dataclass(frozen=True)
class CreatedToken:
    token: ApiToken
    key: str  # shown once; only its hash is stored


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def default_token_expiry() -> datetime | None:
    """When a token created now expires unless its creator says otherwise (None: never)."""
    days = settings.JOBWEAVER_API_TOKEN_DEFAULT_DAYS
    return timezone.now() + timedelta(days=days) if days else None


@transaction.atomic
def api_token_create(
    *,
    user,
    name: str,
    expires_at: datetime | Literal["default"] | None = DEFAULT_EXPIRY,
) -> CreatedToken:
    """A new token for `user`; the returned key is the only copy there will ever be. It expires
    at `expires_at`, never with None, and by default after JOBWEAVER_API_TOKEN_DEFAULT_DAYS."""
    if expires_at == DEFAULT_EXPIRY:
        expires_at = default_token_expiry()
    name = name.strip()
    if not name or len(name) > 100:
        raise InvalidRequest("a token name is 1-100 characters")
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidRequest("a token's expiry must be in the future")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    try:
        with transaction.atomic():
            token = ApiToken.objects.create(
                user=user,
                name=name,
                prefix=key[:SHOWN_PREFIX_CHARS],
                key_hash=_hash(key),
                expires_at=expires_at,
            )
    except IntegrityError:
        raise InvalidRequest(f"{user} already has a token named {name!r}") from None
    return CreatedToken(token=token, key=key)


def api_token_authenticate(*, key: str) -> ApiToken | None:
    """The live token with this key (not revoked, not expired, its user active), or None.
    Records the time of use, at most once per LAST_USED_RESOLUTION."""
    token = _unrevoked_token_with_user(_hash(key))
    now = timezone.now()
    if token is None or not token.user.is_active:
        return None
    if token.expires_at is not None and token.expires_at <= now:
        return None
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def api_token_warm_up() -> None:
    """The statement of every API request's token look-up, for a key hash no token has (reads
    nothing): a web worker runs it on each request thread's new connection before the first
    request (jobweaver.core.db.warm_connection)."""
    _unrevoked_token_with_user("")


def _unrevoked_token_with_user(key_hash: str) -> ApiToken | None:
    """The unrevoked token with this key hash, its user and the permissions the user holds
    loaded, in one statement built once: every API request asks, and then checks permissions;
    the ORM's select_related compiled its query anew each time, for more CPU than PostgreSQL
    spent answering it, and the permissions were a statement of their own (bench/NOTES.md)."""
    sql, token_fields, user_fields = _token_statement()
    with connection.cursor() as cursor:
        cursor.execute(sql, [key_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    token = _instance(ApiToken, token_fields, row[: len(token_fields)])
    token.user = _instance(get_user_model(), user_fields, row[len(token_fields) : -1])
    remember_held_permissions(token.user, row[-1])  # the request's permission checks ask next
    return token


@functools.cache
def _token_statement() -> tuple[str, tuple, tuple]:
    users, qn = get_user_model(), connection.ops.quote_name
    token_fields, user_fields = ApiToken._meta.concrete_fields, users._meta.concrete_fields
    columns = [f"t.{qn(f.column)}" for f in token_fields] + [
        f"u.{qn(f.column)}" for f in user_fields
    ]
    columns.append(f"ARRAY({held_permissions_sql(f'u.{qn(users._meta.pk.column)}')})")
    sql = f"""
        SELECT {", ".join(columns)}
        FROM {qn(ApiToken._meta.db_table)} t JOIN {qn(users._meta.db_table)} u
            ON u.{qn(users._meta.pk.column)} = t.{qn(ApiToken._meta.get_field("user").column)}
        WHERE t.key_hash = %s AND t.revoked_at IS NULL
    """
    return sql, tuple(token_fields), tuple(user_fields)


def _instance(model, fields, values):
    """A model instance from its columns' values, as the ORM would have loaded it (a custom
    user model's field may convert what the database returns)."""
    converted = []
    for field, value in zip(fields, values, strict=True):
        for convert in field.get_db_converters(connection):
            value = convert(value, field, connection)
        converted.append(value)
    return model.from_db(connection.alias, [field.attname for field in fields], converted)


@transaction.atomic
def api_token_rotate(*, user, name: str) -> CreatedToken:
    """Revoke `user`'s live token called `name`, if any, and create a new one by that name
    (with the default expiry)."""
    live = ApiToken.objects.select_for_update().filter(
        user=user, name=name.strip(), revoked_at=None
    )
    api_tokens_revoke(token_ids=list(live.values_list("pk", flat=True)))
    return api_token_create(user=user, name=name)


def api_tokens_revoke(*, token_ids: list[int]) -> int:
    """Revoke tokens at once (already revoked ones stay as they were); returns how many."""
    return ApiToken.objects.filter(pk__in=token_ids, revoked_at=None).update(
        revoked_at=timezone.now()
    )
