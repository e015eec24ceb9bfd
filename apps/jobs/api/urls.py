from django.urls import path

from apps.jobs.api import views

urlpatterns = [
    path("jobs", views.JobListCreateView.as_view(), name="job-list"),
    path("jobs/<str:job_id>", views.JobDetailView.as_view(), name="job-detail"),
    path("jobs/<str:job_id>/retry", views.JobRetryView.as_view(), name="job-retry"),
    path("jobs/<str:job_id>/cancel", views.JobCancelView.as_view(), name="job-cancel"),
]
