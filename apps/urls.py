"""JobWeaver's URLs for a host project (ARCHITECTURE §14): the REST API, its schema and its
Swagger UI, under whatever prefix the host includes them, e.g.

    path("jobweaver/", include("jobweaver.urls"))

The operator's dashboard is its own URLconf (jobweaver.dashboard.urls), for the admin's side.
"""

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from jobweaver.jobs.api import fallbacks

urlpatterns = [
    # The schema and its Swagger UI are public: they describe the API, they grant nothing.
    # The split view serves Swagger UI's start-up script as a file (`?script`), not inline:
    # the page works under a Content-Security-Policy without 'unsafe-inline' scripts.
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[]), name="api-schema"),
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", permission_classes=[]),
        name="api-docs",
    ),
    path("api/", include("jobweaver.jobs.api.urls")),
    path("api/", include("jobweaver.schedules.api.urls")),
    path("api/", include("jobweaver.workflows.api.urls")),
    # Anything else under api/ is the API's JSON 404, never the host's HTML page.
    re_path(r"^api/", fallbacks.api_not_found),
]
