from django.urls import path

from jobweaver.workflows.api import views

# Included at api/ (jobweaver/urls.py), beside the jobs API.
urlpatterns = [
    path("workflows", views.WorkflowListCreateView.as_view(), name="workflow-list"),
    path("workflows/<str:workflow_id>", views.WorkflowDetailView.as_view(), name="workflow-detail"),
    path(
        "workflows/<str:workflow_id>/cancel",
        views.WorkflowCancelView.as_view(),
        name="workflow-cancel",
    ),
]
