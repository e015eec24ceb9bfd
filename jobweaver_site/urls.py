from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from jobweaver.jobs.api import fallbacks

from jobweaver_site import health

urlpatterns = [
    # The operator's cockpit (live dashboard, dead-letter desk): admin pages, staff only.
    path("admin/ops/", include("jobweaver.dashboard.urls")),
    path("admin/", admin.site.urls),
    # The schema and its Swagger UI are public: they describe the API, they grant nothing.
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[]), name="api-schema"),
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(url_name="api-schema", permission_classes=[]),
        name="api-docs",
    ),
    path("api/", include("jobweaver.jobs.api.urls")),
    path("api/", include("jobweaver.schedules.api.urls")),
    # Anything else under /api/ is the API's JSON 404, never Django's HTML page.
    re_path(r"^api/", fallbacks.api_not_found),
    path("healthz", health.healthz),
    path("readyz", health.readyz),
]

handler404 = fallbacks.not_found
handler500 = fallbacks.server_error
