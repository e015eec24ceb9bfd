"""The scheduler's admin: job executions (read-only), pauses, concurrency limits and queues.

Operators act on jobs from the Job admin (Retry, Cancel); the execution list answers "what is
due, what is running, whose lease is about to expire".
"""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from jobweaver.accounts.selectors import holds
from jobweaver.core.admin_tools import ExactSearchMixin, ReadOnlyAdmin
from jobweaver.core.errors import InvalidRequest
from jobweaver.scheduler.models import ConcurrencyLimit, JobExecution, Pause, Queue
from jobweaver.scheduler.selectors import queue_counts
from jobweaver.scheduler.services import (
    concurrency_limit_check,
    concurrency_limit_delete,
    concurrency_limit_set,
    queue_pause,
    queue_pause_check,
    queue_resume,
    queue_settings_check,
    queue_settings_delete,
    queue_settings_set,
)


@admin.register(JobExecution)
class JobExecutionAdmin(ExactSearchMixin, ReadOnlyAdmin):
    list_display = [
        "job",
        "status",
        "priority",
        "retries",
        "attempt_count",
        "next_run_at",
        "lease_expires_at",
        "updated_at",
    ]
    # "set aside": waiting while its key is at its limit (apps/engine/claim/rules.py).
    list_filter = ["status", "cancel_requested", "set_aside"]
    list_select_related = ["job"]
    search_fields = ["job__id", "job__trace_id"]
    search_help_text = "Exact job id or trace id."
    exact_uuid_fields = ("job_id",)
    exact_trace_field = "job__trace_id"
    show_full_result_count = False
    ordering = ["-updated_at"]
    # The execution's key is scoped to its owner (apps/engine/keys.py): shown as the user gave
    # it, which is its job's.
    exclude = ["concurrency_key"]
    readonly_fields = ["key"]

    def get_queryset(self, request):
        """The executions of one's own jobs, or everyone's with jobs.view_all_jobs (§17)."""
        executions = super().get_queryset(request)
        if holds(request.user, "jobweaver_jobs.view_all_jobs"):
            return executions
        return executions.filter(submitted_by=request.user)

    @admin.display(description="retries used")
    def retries(self, execution: JobExecution) -> str:
        return f"{execution.retry_count} / {execution.max_retries}"

    @admin.display(description="concurrency key")
    def key(self, execution: JobExecution) -> str | None:
        return execution.job.concurrency_key


# --- pauses and concurrency limits --------------------------------------------------------------
# Written only through the services, so the admin does what the API and the CLI do: a pause
# added here takes back unstarted deliveries, a deleted one wakes the dispatcher. Who may: the
# same permissions as the API's (scheduler.change_pause, scheduler.change_concurrencylimit).

CHANGE_PAUSE = "jobweaver_scheduler.change_pause"
CHANGE_LIMIT = "jobweaver_scheduler.change_concurrencylimit"
CHANGE_QUEUE = "jobweaver_scheduler.change_queue"


class ChangedByOnePermission(admin.ModelAdmin):
    """Adding, changing and deleting need `permission`, the one the API's views need for the
    same change; staff status grants nothing."""

    permission: str

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(self.permission)

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.user.has_perm(self.permission)

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.user.has_perm(self.permission)


def _form_error(error: InvalidRequest) -> forms.ValidationError:
    return forms.ValidationError(error.message)


class PauseForm(forms.ModelForm):
    class Meta:
        model = Pause
        fields = ["scope", "name", "reason"]

    def clean(self):
        cleaned = super().clean()
        if not self.errors:
            try:
                queue_pause_check(
                    scope=cleaned.get("scope"),
                    name=cleaned.get("name"),
                    reason=cleaned.get("reason") or "",
                )
            except InvalidRequest as error:
                raise _form_error(error) from None
        return cleaned


@admin.register(Pause)
class PauseAdmin(ChangedByOnePermission):
    """Add = pause (queue_pause), delete = resume (queue_resume); a pause is not edited."""

    form = PauseForm
    list_display = ["scope", "name", "reason", "paused_by", "paused_at"]
    list_filter = ["scope"]
    readonly_fields = ["paused_by", "paused_at"]

    permission = CHANGE_PAUSE

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Pause, form, change: bool) -> None:
        pause = queue_pause(
            scope=obj.scope,
            name=obj.name,
            reason=obj.reason,
            paused_by=request.user.get_username(),
        )
        # The admin goes on with `obj` (its log entry, the redirect): make it the saved row.
        obj.pk, obj.reason, obj.paused_by, obj.paused_at = (
            pause.pk,
            pause.reason,
            pause.paused_by,
            pause.paused_at,
        )
        obj._state.adding = False

    def delete_model(self, request: HttpRequest, obj: Pause) -> None:
        queue_resume(scope=obj.scope, name=obj.name)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for scope, name in queryset.values_list("scope", "name"):
            queue_resume(scope=scope, name=name)


class ConcurrencyLimitForm(forms.ModelForm):
    class Meta:
        model = ConcurrencyLimit
        fields = ["pattern", "max_running", "max_per_second", "is_global"]
        help_texts = {
            "pattern": "a concurrency key, or a pattern where * matches any run of characters; "
            "the most specific (longest) matching pattern applies to a key (of two as long, "
            "the global one)",
            "max_running": "at most this many of one key's jobs dispatched or running at once",
            "max_per_second": "at most this many of one key's jobs sent in any one second",
            "is_global": "every owner's jobs of a key count as one key; unticked, each owner's "
            "jobs of a key count on their own",
        }

    def clean(self):
        cleaned = super().clean()
        if not self.errors:
            try:
                concurrency_limit_check(
                    pattern=cleaned.get("pattern") or self.instance.pattern,
                    max_running=cleaned.get("max_running"),
                    max_per_second=cleaned.get("max_per_second"),
                    is_global=bool(cleaned.get("is_global")),
                )
            except InvalidRequest as error:
                raise _form_error(error) from None
        return cleaned


@admin.register(ConcurrencyLimit)
class ConcurrencyLimitAdmin(ChangedByOnePermission):
    """Saved through concurrency_limit_set, deleted through concurrency_limit_delete. The
    pattern is the limit's name: to change it, add the new one and delete the old."""

    form = ConcurrencyLimitForm
    list_display = ["pattern", "max_running", "max_per_second", "is_global", "updated_at"]
    list_filter = ["is_global"]
    search_fields = ["pattern"]

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return ["pattern", "updated_at"] if obj is not None else ["updated_at"]

    permission = CHANGE_LIMIT

    def save_model(self, request: HttpRequest, obj: ConcurrencyLimit, form, change: bool) -> None:
        limit, _ = concurrency_limit_set(
            pattern=obj.pattern,
            max_running=obj.max_running,
            max_per_second=obj.max_per_second,
            is_global=obj.is_global,
        )
        obj.pk, obj.updated_at = limit.pk, limit.updated_at
        obj._state.adding = False

    def delete_model(self, request: HttpRequest, obj: ConcurrencyLimit) -> None:
        concurrency_limit_delete(pattern=obj.pattern)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for pattern in queryset.values_list("pattern", flat=True):
            concurrency_limit_delete(pattern=pattern)


# --- queues -----------------------------------------------------------------------------------
# A queue's settings (its cap and weight, ARCHITECTURE §15), through the services like the API
# and `manage.py queues`; the list also shows each queue's work and executors now. A queue with
# no settings has no cap and weight 1: deleting its row sets it back to that.


class QueueForm(forms.ModelForm):
    class Meta:
        model = Queue
        fields = ["name", "max_running", "weight"]
        help_texts = {
            "max_running": "at most this many of its jobs dispatched or running across all "
            "executors; empty: no cap (to stop it, pause the queue)",
            "weight": "its share (1-100) of executors that serve it and other queues with work "
            "waiting, in proportion to theirs",
        }

    def clean(self):
        cleaned = super().clean()
        if not self.errors:
            try:
                queue_settings_check(
                    name=cleaned.get("name") or self.instance.name,
                    max_running=cleaned.get("max_running"),
                    weight=cleaned.get("weight"),
                )
            except InvalidRequest as error:
                raise _form_error(error) from None
        return cleaned


@admin.register(Queue)
class QueueAdmin(ChangedByOnePermission):
    form = QueueForm
    list_display = ["name", "max_running", "weight", "waiting", "running", "executors", "paused"]
    search_fields = ["name"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # Each row's work and executors now, counted in the list's one statement.
        return super().get_queryset(request).annotate(**queue_counts())

    @admin.display(description="waiting", ordering="waiting_now")
    def waiting(self, queue: Queue) -> int:
        return queue.waiting_now

    @admin.display(description="dispatched or running", ordering="running_now")
    def running(self, queue: Queue) -> int:
        return queue.running_now

    @admin.display(description="live executors")
    def executors(self, queue: Queue) -> int:
        return queue.executors_now

    @admin.display(description="paused", boolean=True)
    def paused(self, queue: Queue) -> bool:
        return queue.paused_now

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return ["name"] if obj is not None else []

    permission = CHANGE_QUEUE

    def save_model(self, request: HttpRequest, obj: Queue, form, change: bool) -> None:
        queue = queue_settings_set(name=obj.name, max_running=obj.max_running, weight=obj.weight)
        obj.pk, obj.updated_at = queue.pk, queue.updated_at
        obj._state.adding = False

    def delete_model(self, request: HttpRequest, obj: Queue) -> None:
        queue_settings_delete(name=obj.name)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for name in queryset.values_list("name", flat=True):
            queue_settings_delete(name=name)
