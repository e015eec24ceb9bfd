"""The operators' view of jobs: list, filter, find, inspect, and act on a selection or on
every job matching a filter (retry, cancel, run now, discard a dead letter).

Jobs are read-only here. They are created through the submission service (the API, `manage.py
submit_job`, or this admin's "Submit a job" page, which validates like the API) and move only
through the scheduler's transitions, so the admin never edits a row: its actions call the same
services as the API (apps/jobs/operations.py applies one per job and reports the skipped).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.utils import flatten_fieldsets
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.db.models.functions import Now
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme

from jobweaver.accounts.throttle import CANCEL, SUBMIT, throttle_take
from jobweaver.core.admin_tools import ExactSearchMixin
from jobweaver.core.errors import JobWeaverError, QuotaExceeded
from jobweaver.core.timeutil import iso
from jobweaver.executor.models import ExecutionAttempt
from jobweaver.jobs.adminlog import log_bulk_action, refused_by_throttle, report_to_operator
from jobweaver.jobs.forms import JobSubmitForm
from jobweaver.jobs.kinds import kind_of
from jobweaver.jobs.models import Job
from jobweaver.jobs.operations import BULK_ACTIONS, jobs_bulk_apply
from jobweaver.jobs.representation import job_to_dict
from jobweaver.jobs.selectors import (
    attempts_for_jobs,
    discarded_since_failure,
    job_events,
    owned_by,
)
from jobweaver.jobs.services import job_submit
from jobweaver.scheduler.models import ExecutionStatus, JobExecution

S = ExecutionStatus
# The confirmation page of an "all matching" action names at most this many jobs.
CONFIRM_SAMPLE_SIZE = 20
# The bulk actions the throttle counts (§17), and from which bucket: one token per action.
THROTTLED_ACTIONS = {"retry": SUBMIT, "cancel": CANCEL}
LAST_ERROR_CHARS = 60


def utc_time(field_name: str, description: str) -> Callable[..., str]:
    """A read-only admin field showing a timestamp as the API does (UTC, milliseconds): the
    admin's default format drops the seconds that leases and backoff delays are measured in."""

    @admin.display(description=f"{description} (UTC)", ordering=field_name)
    def show(self, obj) -> str:
        return iso(getattr(obj, field_name)) or "-"

    return show


class ReadOnlyInline:
    """Inline rows are history and state owned by the scheduler and the executor: show only."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_readonly_fields(self, request, obj=None) -> list[str]:
        # All of them: a form field for a non-editable column (auto timestamps) is an error.
        return flatten_fieldsets(self.get_fieldsets(request, obj))


class ExecutionInline(ReadOnlyInline, admin.StackedInline):
    model = JobExecution
    verbose_name = "execution"
    verbose_name_plural = "execution"
    fieldsets = [
        (None, {"fields": ["status", "retries", "attempt_count", "next_run", "last_error"]}),
        ("Lease", {"fields": ["current_event_id", "lease_expires", "cancel_requested"]}),
        ("Timestamps", {"fields": ["dispatched", "started", "finished", "updated"]}),
    ]
    next_run = utc_time("next_run_at", "next run at")
    lease_expires = utc_time("lease_expires_at", "lease expires at")
    dispatched = utc_time("dispatched_at", "dispatched at")
    started = utc_time("started_at", "started at")
    finished = utc_time("finished_at", "finished at")
    updated = utc_time("updated_at", "updated at")

    @admin.display(description="retries used")
    def retries(self, execution: JobExecution) -> str:
        return f"{execution.retry_count} / {execution.max_retries}"


class AttemptInline(ReadOnlyInline, admin.TabularInline):
    model = ExecutionAttempt
    fields = [
        "attempt",
        "outcome",
        "worker_id",
        "started",
        "finished",
        "progress",
        "error_message",
        "exception_type",
    ]
    ordering = ["attempt"]
    started = utc_time("started_at", "started at")
    finished = utc_time("finished_at", "finished at")
    # The attempt's own page shows its event id, trace id and the lines its LOG steps wrote.
    show_change_link = True

    @admin.display(description="steps")
    def progress(self, attempt: ExecutionAttempt) -> str:
        return f"{attempt.steps_completed} / {attempt.total_steps}"


def _execution(job: Job) -> JobExecution | None:
    # Every job gets its execution in the submit transaction; stay readable if one is missing.
    return getattr(job, "execution", None)


class StatusFilter(admin.SimpleListFilter):
    """The execution's status, plus the operator's finer cuts of it. Static choices: the
    filter costs the page no query."""

    title = "status"
    parameter_name = "execution__status"
    EXTRA = {
        "RETRYING": ("Retrying (pending after a failure)", Q(retry_count__gt=0)),
        "DUE": ("Due now (pending)", Q(next_run_at__lte=Now())),
        "DELAYED": ("Delayed (pending: runAt or backoff)", Q(next_run_at__gt=Now())),
    }

    def lookups(self, request, model_admin):
        choices = []
        for status in S:
            choices.append((status.value, status.value))
            if status == S.PENDING:
                choices += [(key, label) for key, (label, _) in self.EXTRA.items()]
            if status == S.FAILED:
                choices.append(("DEAD_LETTER", "Dead letters (failed, not discarded)"))
        return choices

    def queryset(self, request, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if not value:
            return queryset
        if value in self.EXTRA:
            condition = self.EXTRA[value][1]
            prefixed = Q(
                *[(f"execution__{field}", v) for field, v in condition.children],
                _connector=condition.connector,
            )
            return queryset.filter(prefixed, execution__status=S.PENDING)
        if value == "DEAD_LETTER":
            return queryset.filter(execution__status=S.FAILED).exclude(
                discarded_since_failure(job="id", finished_at="execution__finished_at")
            )
        if value not in S.values:
            raise IncorrectLookupParameters(f"unknown status {value!r}")
        return queryset.filter(execution__status=value)


class PriorityFilter(admin.SimpleListFilter):
    title = "priority"
    parameter_name = "priority"

    def lookups(self, request, model_admin):
        return [(str(p), str(p)) for p in range(9, -1, -1)]

    def queryset(self, request, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if value is None:
            return queryset
        if not value.isdigit():
            raise IncorrectLookupParameters(f"priority must be 0-9, got {value!r}")
        return queryset.filter(priority=int(value))


class HasErrorFilter(admin.SimpleListFilter):
    title = "has errors"
    parameter_name = "has_error"

    def lookups(self, request, model_admin):
        return [("yes", "With a last error"), ("no", "Without")]

    def queryset(self, request, queryset: QuerySet[Job]) -> QuerySet[Job]:
        if self.value() == "yes":
            return queryset.exclude(execution__last_error="")
        if self.value() == "no":
            return queryset.filter(execution__last_error="")
        return queryset


def _path(detail: dict, execution: JobExecution | None) -> list[dict]:
    """The job's way so far: submitted → dispatched → running → outcome, with times."""
    steps = [{"label": "submitted", "at": detail["createdAt"]}]
    if execution is None:
        return steps
    steps.append({"label": "dispatched", "at": iso(execution.dispatched_at)})
    steps.append({"label": "running", "at": iso(execution.started_at)})
    if execution.is_terminal:
        steps.append({"label": execution.status.lower(), "at": iso(execution.finished_at)})
    elif execution.status == S.PENDING and execution.attempt_count:
        steps.append({"label": "waiting to retry", "at": iso(execution.next_run_at)})
    else:
        steps.append({"label": "outcome", "at": None})
    return steps


def _attempt_rows(attempts: list[ExecutionAttempt]) -> list[dict]:
    rows = []
    for attempt in attempts:
        duration = None
        if attempt.finished_at and attempt.started_at:
            duration = (attempt.finished_at - attempt.started_at).total_seconds()
        rows.append({"attempt": attempt, "duration": duration})
    return rows


@admin.register(Job)
class JobAdmin(ExactSearchMixin, admin.ModelAdmin):
    list_display = [
        "short_id",
        "status",
        "job_type",
        "priority",
        "attempts",
        "retries",
        "next_run",
        "last_error",
        "created",
    ]
    list_display_links = ["short_id"]
    list_filter = [
        StatusFilter,
        "job_type",
        PriorityFilter,
        ("created_at", admin.DateFieldListFilter),
        HasErrorFilter,
    ]
    # One query for the page, whatever its size: every column reads the job or its execution.
    list_select_related = ["execution"]
    # Search is exact on ids (see get_search_results); the fields here only label the box.
    search_fields = ["id", "trace_id"]
    search_help_text = (
        "Job id, trace id, idempotency key or worker id (exact), or words of the last error."
    )
    exact_uuid_fields = ("id",)
    # Counting every job on each page load is what makes big changelists slow.
    show_full_result_count = False
    actions = ["retry_jobs", "cancel_jobs", "run_now_jobs", "discard_jobs"]
    fieldsets = [
        (None, {"fields": ["id", "job_type", "priority", "trace_id"]}),
        ("Limits", {"fields": ["max_retries", "timeout_seconds", "run_at"]}),
        (
            "Retry policy (a task's own; empty: the settings')",
            {"fields": ["retry_on", "retry_backoff", "retry_jitter", "hard_timeout_seconds"]},
        ),
        ("What to run", {"fields": ["steps_json", "task_result", "queue_name", "task_priority"]}),
        ("Submission", {"fields": ["submitted_by", "idempotency_key", "created_at", "updated_at"]}),
    ]
    readonly_fields = ["steps_json", "task_result"]
    inlines = [ExecutionInline, AttemptInline]
    change_list_template = "admin/jobweaver_jobs/job/change_list.html"
    change_form_template = "admin/jobweaver_jobs/job/change_form.html"

    class Media:
        css = {"all": ["dashboard/cockpit.css"]}
        js = ["dashboard/copy.js"]

    # --- read-only: jobs come from the submission service and change through the scheduler -----

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return False

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """Retrying and cancelling are what "change job" means for a row nobody edits; on
        another user's job they need jobs.operate_all_jobs too (jobs_bulk_apply skips it)."""
        return request.user.has_perm(f"{self.opts.app_label}.change_{self.opts.model_name}")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        """One's own jobs, or everyone's with jobs.view_all_jobs (§17): the list, the change
        pages, search and "all matching" all read this."""
        return owned_by(super().get_queryset(request), request.user)

    # --- list columns -------------------------------------------------------------------------

    @admin.display(description="id", ordering="id")
    def short_id(self, job: Job) -> str:
        return format_html(
            '<span class="jw-mono" title="{}">{}</span>'
            '<button type="button" class="jw-copy" data-copy="{}" title="Copy the job id">⧉'
            "</button>",
            job.id,
            str(job.id)[:8],
            job.id,
        )

    @admin.display(description="status", ordering="execution__status")
    def status(self, job: Job) -> str:
        execution = _execution(job)
        if execution is None:
            return "-"
        shown = execution.status
        if shown == S.PENDING and execution.retry_count:
            return format_html(
                '<span class="jw-badge jw-RETRYING" title="retry {} of {}">PENDING · retry</span>',
                execution.retry_count,
                execution.max_retries,
            )
        return format_html('<span class="jw-badge jw-{}">{}</span>', shown, shown)

    @admin.display(description="next run (UTC)", ordering="execution__next_run_at")
    def next_run(self, job: Job) -> str:
        execution = _execution(job)
        if execution is None or execution.status != S.PENDING:
            return "-"
        return iso(execution.next_run_at)

    @admin.display(description="last error")
    def last_error(self, job: Job) -> str:
        execution = _execution(job)
        error = execution.last_error if execution else ""
        if not error:
            return "-"
        short = error if len(error) <= LAST_ERROR_CHARS else error[: LAST_ERROR_CHARS - 1] + "…"
        return format_html('<span class="jw-error" title="{}">{}</span>', error, short)

    created = utc_time("created_at", "created")

    @admin.display(description="retries used")
    def retries(self, job: Job) -> str:
        execution = _execution(job)
        return f"{execution.retry_count} / {execution.max_retries}" if execution else "-"

    @admin.display(description="attempts", ordering="execution__attempt_count")
    def attempts(self, job: Job) -> int | str:
        execution = _execution(job)
        return execution.attempt_count if execution else "-"

    @admin.display(description="payload")
    def steps_json(self, job: Job) -> str:
        """A simulation's steps, or a Python task's {"task", "args", "kwargs"} (§13)."""
        shown = kind_of(job).admin_payload(job)
        return format_html("<pre>{}</pre>", json.dumps(shown, indent=2, ensure_ascii=False))

    @admin.display(description="result")
    def task_result(self, job: Job) -> str:
        """A TASK job's return value, recorded with its successful attempt."""
        return kind_of(job).admin_result(job)

    # --- search -------------------------------------------------------------------------------

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        """A UUID finds that job (or the jobs of that trace); any other term is matched
        exactly against trace ids, idempotency keys and executor ids, and as words of the last
        error (case-insensitive)."""
        term = search_term.strip()
        try:
            uuid.UUID(term)
        except ValueError:
            if not term:
                return queryset, False
            match = (
                Q(trace_id=term)
                | Q(idempotency_key=term)
                | Q(execution__worker_id=term)
                | Q(execution__last_error__icontains=term)
            )
            return queryset.filter(match), False
        return super().get_search_results(request, queryset, term)

    # --- actions ------------------------------------------------------------------------------

    @admin.action(description="Retry selected FAILED or CANCELLED jobs", permissions=["operate"])
    def retry_jobs(self, request: HttpRequest, queryset: QuerySet[Job]):
        return self._bulk_action(request, queryset, "retry")

    @admin.action(description="Cancel selected jobs", permissions=["operate"])
    def cancel_jobs(self, request: HttpRequest, queryset: QuerySet[Job]):
        return self._bulk_action(request, queryset, "cancel")

    @admin.action(description="Run selected delayed PENDING jobs now", permissions=["operate"])
    def run_now_jobs(self, request: HttpRequest, queryset: QuerySet[Job]):
        return self._bulk_action(request, queryset, "run_now")

    @admin.action(description="Discard selected dead letters", permissions=["operate"])
    def discard_jobs(self, request: HttpRequest, queryset: QuerySet[Job]):
        return self._bulk_action(request, queryset, "discard")

    def _bulk_action(self, request: HttpRequest, queryset: QuerySet[Job], action: str):
        """A selection is acted on at once; "select all N" (every job matching the filter)
        goes to the confirmation page with the count first."""
        if request.POST.get("select_across") == "1":
            return HttpResponseRedirect(self._bulk_url(action, request.GET))
        job_ids = list(queryset.values_list("id", flat=True))
        self._apply(request, action, job_ids, scope=f"{len(job_ids)} selected")
        return None

    def _apply(self, request: HttpRequest, action: str, job_ids, *, scope: str) -> None:
        kind = THROTTLED_ACTIONS.get(action)
        if kind is not None and refused_by_throttle(request, kind):
            return
        report = jobs_bulk_apply(action=action, job_ids=job_ids, user=request.user)
        log_bulk_action(request, report, scope=scope)
        report_to_operator(request, report)

    # --- pages of our own: act on all matching, submit a job, the job page's panel -------------

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        own = [
            path(
                "bulk/<str:action>/",
                self.admin_site.admin_view(self.bulk_view),
                name="{}_{}_bulk".format(*info),
            ),
            path(
                "submit/",
                self.admin_site.admin_view(self.submit_view),
                name="{}_{}_submit".format(*info),
            ),
        ]
        return own + super().get_urls()

    def _bulk_url(self, action: str, filters) -> str:
        url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_bulk", args=[action])
        query = filters.urlencode() if hasattr(filters, "urlencode") else urlencode(filters)
        return f"{url}?{query}" if query else url

    def bulk_view(self, request: HttpRequest, action: str) -> HttpResponse:
        """`action` on every job matching the job list's filters and search (the query string):
        GET shows the confirmation page with the count; POST acts. A POST with `ids` acts on
        those jobs only (the job page's buttons)."""
        if action not in BULK_ACTIONS:
            raise Http404("no such action")
        if not self.has_operate_permission(request):
            raise PermissionDenied
        changelist_url = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist")
        filters = request.GET.copy()
        for name in ("p", "o", "e"):
            filters.pop(name, None)
        back_url = f"{changelist_url}?{filters.urlencode()}" if filters else changelist_url
        if request.method == "POST" and request.POST.getlist("ids"):
            visible = self.get_queryset(request).filter(id__in=self._ids(request))
            job_ids = list(visible.values_list("id", flat=True))
            self._apply(request, action, job_ids, scope=f"{len(job_ids)} selected")
            next_url = request.POST.get("next", "")
            if not url_has_allowed_host_and_scheme(next_url, {request.get_host()}):
                next_url = back_url
            return HttpResponseRedirect(next_url)
        try:
            changelist = self.get_changelist_instance(request)
        except IncorrectLookupParameters:
            return HttpResponseBadRequest("unknown filter in the query string")
        matching = changelist.get_queryset(request)
        scope = f"all matching {filters.urlencode() or 'every job'}"[:150]
        if request.method == "POST" and request.POST.get("confirm") == "yes":
            self._apply(request, action, matching.values_list("id", flat=True), scope=scope)
            return HttpResponseRedirect(back_url)
        count = matching.count()
        sample = list(matching.values_list("id", flat=True)[:CONFIRM_SAMPLE_SIZE])
        context = {
            **self.admin_site.each_context(request),
            "title": f"{BULK_ACTIONS[action].label} {count} matching jobs?",
            "action": BULK_ACTIONS[action],
            "count": count,
            "scope": "every job matching " + (filters.urlencode() or "no filter: all jobs"),
            "sample": sample,
            "fields": [],
            "back_url": back_url,
            "opts": self.opts,
        }
        return TemplateResponse(request, "dashboard/confirm.html", context)

    @staticmethod
    def _ids(request: HttpRequest) -> list[uuid.UUID]:
        ids = []
        for raw in request.POST.getlist("ids"):
            try:
                ids.append(uuid.UUID(raw))
            except ValueError:
                continue  # not a job id: nothing to act on
        return ids

    def submit_view(self, request: HttpRequest) -> HttpResponse:
        """Submit a SIMULATION or TASK job through `job_submit`, validated as the API does."""
        if not request.user.has_perm(f"{self.opts.app_label}.add_{self.opts.model_name}"):
            raise PermissionDenied
        form = JobSubmitForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            wait = throttle_take(user=request.user, kind=SUBMIT)  # as POST /api/jobs does
            try:
                if wait is not None:
                    raise QuotaExceeded(
                        f"Too many requests: nothing was done; try again in {wait} s."
                    )
                result = job_submit(
                    spec=form.spec,
                    submitted_by=request.user,
                    idempotency_key=form.cleaned_data["idempotency_key"] or None,
                )
            except JobWeaverError as error:
                form.add_error(None, error.message)
            else:
                job = result.job
                verb = "Submitted" if result.created else "Found the earlier submission of"
                self.message_user(request, f"{verb} job {job.id}.", messages.SUCCESS)
                self.log_addition(request, job, [{"added": {}}])
                return HttpResponseRedirect(
                    reverse(
                        f"admin:{self.opts.app_label}_{self.opts.model_name}_change",
                        args=[job.id],
                    )
                )
        context = {
            **self.admin_site.each_context(request),
            "title": "Submit a job",
            "form": form,
            "opts": self.opts,
        }
        return TemplateResponse(request, "dashboard/submit.html", context)

    def changelist_view(self, request: HttpRequest, extra_context=None):
        filters = request.GET.copy()
        for name in ("p", "o", "e", "_changelist_filters"):
            filters.pop(name, None)
        can_operate = self.has_operate_permission(request)
        extra = {
            "can_operate": can_operate,
            "can_submit": request.user.has_perm(
                f"{self.opts.app_label}.add_{self.opts.model_name}"
            ),
            "bulk_links": [
                {"label": action.label, "url": self._bulk_url(name, filters)}
                for name, action in BULK_ACTIONS.items()
            ]
            if can_operate
            else [],
        }
        return super().changelist_view(request, {**extra, **(extra_context or {})})

    def change_view(self, request: HttpRequest, object_id, form_url="", extra_context=None):
        # A malformed id is an unknown job (Django's own view redirects to the list), never a
        # 500; and the panel reads only a job this user may see.
        job = None
        with contextlib.suppress(ValueError):
            visible = self.get_queryset(request).select_related("execution")
            job = visible.filter(pk=uuid.UUID(str(object_id))).first()
        extra = {}
        if job is not None:
            execution = _execution(job)
            attempts = attempts_for_jobs(job_ids=[job.id])[job.id]
            detail = job_to_dict(job, attempts) if execution else None
            progress = detail["progress"] if detail else {"stepsCompleted": 0, "totalSteps": 0}
            total = progress["totalSteps"]
            extra = {
                "jw_job": job,
                "jw_execution": execution,
                "jw_progress": progress,
                "jw_percent": round(100 * progress["stepsCompleted"] / total) if total else 0,
                "jw_path": _path(detail or {"createdAt": iso(job.created_at)}, execution),
                "jw_attempts": _attempt_rows(attempts),
                "jw_events": job_events(job_id=job.id),
                "jw_payload": json.dumps(job.instruction, indent=2, ensure_ascii=False),
                "jw_result": detail.get("result") if detail else None,
                "jw_shows_result": kind_of(job).shows_result,
                "jw_actions": (
                    [(name, action.label) for name, action in BULK_ACTIONS.items()]
                    if self.has_operate_permission(request)
                    else []
                ),
            }
        return super().change_view(request, object_id, form_url, {**extra, **(extra_context or {})})
