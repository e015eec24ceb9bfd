"""Workflows in the admin (ARCHITECTURE §16): the list by status, and a workflow's page with its
graph drawn as SVG (apps/workflows/graph.py), each job a link to its page; cancel and retry its
failed jobs as actions, through the same services as the API and the CLI. Read-only otherwise:
workflows change only through their jobs. The job permissions gate it, as they gate the API."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from jobweaver.accounts.throttle import CANCEL, SUBMIT
from jobweaver.core.errors import JobWeaverError
from jobweaver.jobs.adminlog import refused_by_throttle
from jobweaver.jobs.selectors import may_operate, owned_by
from jobweaver.workflows.graph import GraphNode, svg
from jobweaver.workflows.models import Workflow
from jobweaver.workflows.selectors import workflow_nodes
from jobweaver.workflows.services import workflow_cancel, workflow_retry_failed

VIEW_JOB, CHANGE_JOB = "jobweaver_jobs.view_job", "jobweaver_jobs.change_job"


@admin.register(Workflow)
class WorkflowAdmin(admin.ModelAdmin):
    list_display = ["short_id", "name", "status", "jobs", "created_at", "finished_at"]
    list_display_links = ["short_id", "name"]
    list_filter = ["status", ("created_at", admin.DateFieldListFilter)]
    search_fields = ["name"]
    ordering = ["-created_at"]
    show_full_result_count = False
    actions = ["cancel_workflows", "retry_failed_jobs"]
    # The graph first: it is what the page is for.
    fieldsets = [
        (None, {"fields": ["graph"]}),
        (
            "Workflow",
            {
                "fields": [
                    "id",
                    "name",
                    "status",
                    "unfinished",
                    "failed",
                    "created_at",
                    "finished_at",
                    "submitted_by",
                    "trace_id",
                ]
            },
        ),
    ]
    readonly_fields = [field for _, options in fieldsets for field in options["fields"]]

    # --- the job permissions, as for the API -----------------------------------------------------

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.user.has_perm(VIEW_JOB)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(VIEW_JOB)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_operate_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(CHANGE_JOB)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Workflow]:
        """One's own workflows, or everyone's with jobs.view_all_jobs (§17)."""
        return owned_by(super().get_queryset(request), request.user)

    # --- columns and the graph ------------------------------------------------------------------

    @admin.display(description="id", ordering="id")
    def short_id(self, workflow: Workflow) -> str:
        return str(workflow.id)[:8]

    @admin.display(description="jobs")
    def jobs(self, workflow: Workflow) -> str:
        return f"{workflow.unfinished} unfinished, {workflow.failed} failed"

    @admin.display(description="graph")
    def graph(self, workflow: Workflow):
        nodes = [
            GraphNode(
                ref=node["ref"],
                status=node["status"],
                depends_on=tuple(node["dependsOn"]),
                href=reverse("admin:jobweaver_jobs_job_change", args=[node["jobId"]]),
            )
            for node in workflow_nodes(workflow)
        ]
        # svg() escapes every text it writes.
        return format_html(
            '<div class="jw-workflow-graph-frame" style="overflow:auto;max-width:100%">{}</div>',
            mark_safe(svg(nodes)),  # built from escaped parts only (graph.svg)
        )

    # --- actions ------------------------------------------------------------------------------

    @admin.action(description="Cancel selected workflows", permissions=["operate"])
    def cancel_workflows(self, request: HttpRequest, queryset: QuerySet[Workflow]) -> None:
        self._each(request, queryset, workflow_cancel, "cancelled")

    @admin.action(
        description="Retry the failed jobs of selected workflows", permissions=["operate"]
    )
    def retry_failed_jobs(self, request: HttpRequest, queryset: QuerySet[Workflow]) -> None:
        self._each(request, queryset, workflow_retry_failed, "retried its failed jobs")

    def _each(self, request: HttpRequest, queryset, action, verb: str) -> None:
        kind = CANCEL if action is workflow_cancel else SUBMIT  # retrying queues work again
        if refused_by_throttle(request, kind):
            return
        for workflow in queryset:
            if not may_operate(request.user, workflow.submitted_by_id):
                self.message_user(
                    request,
                    f"{workflow.name}: another user's workflow needs jobs.operate_all_jobs",
                    messages.WARNING,
                )
                continue
            try:
                action(workflow_id=workflow.id)
            except JobWeaverError as exc:
                self.message_user(request, f"{workflow.name}: {exc.message}", messages.WARNING)
            else:
                self.message_user(request, f"Workflow {workflow.name} {verb}.", messages.SUCCESS)
