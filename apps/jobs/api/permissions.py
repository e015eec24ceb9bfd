"""Function-level authorization of the API (ARCHITECTURE §8): which model permission each
operation needs. Object-level scoping (own jobs unless `jobs.view_all_jobs`) lives in the job
selectors, so a job of another user is simply not found (404), never "forbidden" (which would
confirm that it exists). Staff status grants nothing here: only permissions do."""

from __future__ import annotations

from rest_framework.permissions import BasePermission

from jobweaver.accounts.selectors import missing_permissions


class HasOperationPermission(BasePermission):
    """The view's `required_permissions` for the request's method, e.g.
    `{"POST": ("jobweaver_jobs.add_job",)}`, all of them; and of its `any_permissions` for the
    method, at least one. Methods listed in neither need only authentication."""

    message = "You do not have permission to perform this action"

    def has_permission(self, request, view) -> bool:
        user = request.user
        if user is None or not user.is_authenticated:
            return False
        needed = getattr(view, "required_permissions", {}).get(request.method, ())
        missing = missing_permissions(user, needed)
        if missing:
            self.message = f"missing permission: {', '.join(missing)}"
            return False
        one_of = getattr(view, "any_permissions", {}).get(request.method, ())
        if one_of and len(missing_permissions(user, one_of)) == len(one_of):
            self.message = f"needs one of the permissions: {', '.join(one_of)}"
            return False
        return True
