"""Pieces shared by the apps' admins: read-only registrations and exact-id search."""

from __future__ import annotations

import uuid

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written only by the services: operators look, they do not edit."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


class ExactSearchMixin:
    """Search by exact matches on indexed columns instead of a substring scan.

    A term that parses as a UUID is looked up in every field of `exact_uuid_fields`, and also
    as a trace id (the default trace id is a UUID's hex); any other term only as a trace id.
    """

    exact_uuid_fields: tuple[str, ...] = ()
    exact_trace_field = "trace_id"

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        match = Q(**{self.exact_trace_field: term})
        try:
            value = uuid.UUID(term)
        except ValueError:
            return queryset.filter(match), False
        for field in self.exact_uuid_fields:
            match |= Q(**{field: value})
        return queryset.filter(match), False
