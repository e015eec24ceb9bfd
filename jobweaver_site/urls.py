from django.contrib import admin
from django.urls import include, path

from jobweaver.dashboard.views import view_on_site
from jobweaver.jobs.api import fallbacks
from jobweaver_site import health, metrics

urlpatterns = [
    # The operator's cockpit (live dashboard, dead-letter desk): admin pages, staff only.
    path("admin/ops/", include("jobweaver.dashboard.urls")),
    # The admin's "view on site" redirect, answering one 404 for a bad or unknown id (§17).
    path("admin/r/<int:content_type_id>/<path:object_id>/", admin.site.admin_view(view_on_site)),
    path("admin/", admin.site.urls),
    # JobWeaver's REST API, its schema and Swagger UI, as a host project mounts them (§14).
    path("", include("jobweaver.urls")),
    path("healthz", health.healthz),
    path("readyz", health.readyz),
    # Prometheus, with a bearer token (jobweaver_site/metrics.py).
    path("metrics", metrics.metrics),
]

handler404 = fallbacks.not_found
handler500 = fallbacks.server_error
