from django.urls import path

from jobweaver.schedules.api import views

# Included at api/ (jobweaver_site/urls.py), beside the jobs API.
urlpatterns = [
    path("schedules", views.ScheduleListCreateView.as_view(), name="schedule-list"),
    path("schedules/<str:name>", views.ScheduleDetailView.as_view(), name="schedule-detail"),
    path("schedules/<str:name>/pause", views.SchedulePauseView.as_view(), name="schedule-pause"),
    path("schedules/<str:name>/resume", views.ScheduleResumeView.as_view(), name="schedule-resume"),
]
