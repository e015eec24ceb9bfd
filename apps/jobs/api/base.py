"""The base of every JobWeaver API view: the API carries its own authentication, permissions,
parsers, renderers, error body, schema, body limits and trace id (ARCHITECTURE §14), so it
answers the same under any URL prefix whatever the host's REST_FRAMEWORK and middleware say.
"""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from rest_framework.authentication import SessionAuthentication
from rest_framework.parsers import JSONParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView

from jobweaver.accounts.authentication import ApiTokenAuthentication
from jobweaver.conf import settings
from jobweaver.core.authority import acting_as
from jobweaver.core.logcontext import TRACE_ID_PATTERN, log_context
from jobweaver.jobs.api.errors import api_exception_handler
from jobweaver.jobs.api.middleware import refused_body


class JobWeaverAPIView(APIView):
    # `Authorization: Token <key>` against hashed, named, revocable tokens; or the admin's
    # session, with DRF's CSRF check on unsafe methods.
    authentication_classes = [ApiTokenAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]
    parser_classes = [JSONParser]
    renderer_classes = [JSONRenderer]
    schema = AutoSchema()
    # The largest body this view reads (JOBWEAVER_MAX_REQUEST_BYTES unless it says otherwise).
    body_limit_setting = "JOBWEAVER_MAX_REQUEST_BYTES"

    def get_exception_handler(self):
        return api_exception_handler

    def dispatch(self, request, *args, **kwargs):
        # Before anything reads the body (authentication, CSRF, parsing): an oversized or
        # mislabelled body is the API's 4xx error body, never Django's error page.
        refused = refused_body(request, getattr(settings, self.body_limit_setting))
        if refused is not None:
            return refused
        trace_id = request.headers.get("X-Trace-Id")
        if trace_id is not None and not TRACE_ID_PATTERN.match(trace_id):
            trace_id = None
        with log_context(trace_id=trace_id):
            return super().dispatch(request, *args, **kwargs)

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)  # authenticates and checks permissions
        # Code reached from here through the Tasks API reads as this user (§17), until the
        # response is made.
        self._acting = acting_as(request.user)
        self._acting.__enter__()

    def finalize_response(self, request, response, *args, **kwargs):
        acting = getattr(self, "_acting", None)
        if acting is not None:
            self._acting = None
            acting.__exit__(None, None, None)
        return super().finalize_response(request, response, *args, **kwargs)
