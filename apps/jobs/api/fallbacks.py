"""The API's error body where DRF's exception handler does not reach: an unknown route under
/api/, and a server error raised outside a view (middleware, URL resolution). Everything else
keeps Django's own pages (the admin's)."""

from __future__ import annotations

import logging

from django.http import JsonResponse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt

from jobweaver.jobs.api.errors import error_body
from jobweaver.jobs.api.middleware import API_PREFIX

logger = logging.getLogger(__name__)


@csrf_exempt  # any method, any session: the answer is the same 404
def api_not_found(request, *args, **kwargs):
    return JsonResponse(
        error_body(404, "API.JOB_NOT_FOUND", "No such API endpoint; see /api/docs/"), status=404
    )


def not_found(request, exception=None):
    if request.path.startswith(API_PREFIX):
        return api_not_found(request)
    return defaults.page_not_found(request, exception)


def server_error(request):
    if request.path.startswith(API_PREFIX):
        return JsonResponse(
            error_body(500, "API.INTERNAL_ERROR", "Internal server error"), status=500
        )
    return defaults.server_error(request)
