from django.contrib import admin
from django.urls import include, path

from jobweaver_site import health

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("apps.jobs.api.urls")),
    path("healthz", health.healthz),
    path("readyz", health.readyz),
]
