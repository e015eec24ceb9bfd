"""API tokens in the admin: who has which, when it was last used, revoke. A key is never shown:
only its hash is stored, and tokens are created with `manage.py create_api_token`."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from jobweaver.accounts.models import ApiToken
from jobweaver.accounts.services import api_tokens_revoke


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "user",
        "prefix",
        "created_at",
        "last_used_at",
        "expires_at",
        "revoked_at",
    ]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username", "prefix"]
    fields = ["name", "user", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at"]
    readonly_fields = fields
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a key must be shown once to its owner: manage.py create_api_token

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False  # revoke instead: the row stays as history

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        count = api_tokens_revoke(token_ids=list(queryset.values_list("pk", flat=True)))
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)
