from django.contrib import admin
from django.urls import path

from jobweaver.dashboard import views

urlpatterns = [
    path("", admin.site.admin_view(views.dashboard), name="jobweaver-dashboard"),
    path("live/", admin.site.admin_view(views.dashboard_live), name="jobweaver-dashboard-live"),
    path("resume/", admin.site.admin_view(views.pause_resume), name="jobweaver-resume"),
    path(
        "dead-letters/",
        admin.site.admin_view(views.dead_letter_desk),
        name="jobweaver-dead-letters",
    ),
]
