from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from jobweaver_site import health

urlpatterns = [
    path("admin/", admin.site.urls),
    # The schema and its Swagger UI are public: they describe the API, they grant nothing.
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[]), name="api-schema"),
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(url_name="api-schema", permission_classes=[]),
        name="api-docs",
    ),
    path("api/", include("apps.jobs.api.urls")),
    path("healthz", health.healthz),
    path("readyz", health.readyz),
]
