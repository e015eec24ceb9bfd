from django.urls import path, register_converter

from jobweaver.jobs.api import controls, views


class AnyText:
    """Any non-empty text, line breaks and "/" included. Django's own `path` converter stops at a
    line break, so a pattern holding one (sent as %0A) would match no route and get the
    catch-all 404; with this one it reaches the view, whose check answers 400."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(AnyText, "anytext")

urlpatterns = [
    path("jobs", views.JobListCreateView.as_view(), name="job-list"),
    # Before jobs/<job_id>, which would take "batch" for an id.
    path("jobs/batch", views.JobBatchView.as_view(), name="job-batch"),
    path("jobs/<str:job_id>", views.JobDetailView.as_view(), name="job-detail"),
    path("jobs/<str:job_id>/attempts", views.JobAttemptsView.as_view(), name="job-attempts"),
    path("jobs/<str:job_id>/retry", views.JobRetryView.as_view(), name="job-retry"),
    path("jobs/<str:job_id>/cancel", views.JobCancelView.as_view(), name="job-cancel"),
    path("stats", views.StatsView.as_view(), name="stats"),
    path("pauses", controls.PauseListCreateView.as_view(), name="pause-list"),
    path("pauses/<str:scope>/<str:name>", controls.PauseDetailView.as_view(), name="pause-detail"),
    path("limits", controls.LimitListView.as_view(), name="limit-list"),
    path("queues", controls.QueueListView.as_view(), name="queue-list"),
    path("queues/<str:name>", controls.QueueDetailView.as_view(), name="queue-detail"),
    # A pattern may hold "/" (sent as %2F, decoded before routing) as well as "*".
    path("limits/<anytext:pattern>", controls.LimitDetailView.as_view(), name="limit-detail"),
]
