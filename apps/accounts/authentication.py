"""`Authorization: Token <key>` against our hashed API tokens (ARCHITECTURE §8)."""

from __future__ import annotations

from rest_framework import authentication, exceptions

from jobweaver.accounts.services import api_token_authenticate


class ApiTokenAuthentication(authentication.TokenAuthentication):
    """DRF's header parsing and challenge ("Token"), our token store."""

    def authenticate_credentials(self, key: str):
        token = api_token_authenticate(key=key)
        if token is None:
            # One message for unknown, revoked and expired: nothing to learn by probing.
            raise exceptions.AuthenticationFailed("Invalid, expired or revoked token")
        return token.user, token
