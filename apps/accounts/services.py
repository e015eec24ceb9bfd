"""Creating, checking and revoking API tokens."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from jobweaver.accounts.models import ApiToken
from jobweaver.core.errors import InvalidRequest

KEY_PREFIX = "jw_"
SHOWN_PREFIX_CHARS = 10
# last_used_at is a hint for operators, not an audit log: write it at most this often.
LAST_USED_RESOLUTION = timedelta(seconds=60)


@dataclass(frozen=True)
class CreatedToken:
    token: ApiToken
    key: str  # shown once; only its hash is stored


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@transaction.atomic
def api_token_create(*, user, name: str, expires_at: datetime | None = None) -> CreatedToken:
    """A new token for `user`; the returned key is the only copy there will ever be."""
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
    token = (
        ApiToken.objects.select_related("user").filter(key_hash=_hash(key), revoked_at=None).first()
    )
    now = timezone.now()
    if token is None or not token.user.is_active:
        return None
    if token.expires_at is not None and token.expires_at <= now:
        return None
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


@transaction.atomic
def api_token_rotate(*, user, name: str) -> CreatedToken:
    """Revoke `user`'s live token called `name`, if any, and create a new one by that name."""
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
