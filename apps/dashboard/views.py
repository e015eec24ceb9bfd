"""The cockpit's admin pages: the live dashboard (and the JSON it refreshes from) and the
dead-letter desk. Wrapped in the admin site's `admin_view` (apps/dashboard/urls.py): staff only,
with the admin's login page for everyone else."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.admin.models import DELETION, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.contrib.contenttypes.views import shortcut
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from jobweaver.core.errors import InvalidRequest
from jobweaver.core.timeutil import iso
from jobweaver.dashboard.charts import throughput_svg
from jobweaver.dashboard.kafka_status import kafka_status
from jobweaver.dashboard.selectors import (
    GROUP_ERROR_CHARS,
    attempts_per_minute,
    database_health,
    database_now,
    dead_letter_groups,
    dead_letter_job_ids,
    executors_with_work,
    recent_failures,
    status_counts,
)
from jobweaver.jobs.adminlog import log_bulk_action, report_to_operator
from jobweaver.jobs.operations import BULK_ACTIONS, jobs_bulk_apply
from jobweaver.scheduler.models import Pause
from jobweaver.scheduler.selectors import (
    concurrency_limit_list,
    limit_to_dict,
    pause_list,
    pause_to_dict,
    queue_list,
    queues_without_executor,
)
from jobweaver.scheduler.services import queue_resume
from jobweaver.workflows.selectors import workflow_counts

VIEW_JOB = "jobweaver_jobs.view_job"
# The dashboard and the dead-letter desk show every tenant's work: operators only (§17).
VIEW_ALL_JOBS = "jobweaver_jobs.view_all_jobs"
OPERATE = (
    "jobweaver_jobs.change_job"  # retrying and cancelling are what "change job" means (JobAdmin)
)
CHANGE_PAUSE = "jobweaver_scheduler.change_pause"  # pause and resume, as in the API and the admin
REFRESH_SECONDS = 3
DESK_ACTIONS = ("retry", "discard")


def job_list_url(**params) -> str:
    """The admin's job list, filtered (the JobAdmin's filter parameters)."""
    url = reverse("admin:jobweaver_jobs_job_changelist")
    return f"{url}?{urlencode(params)}" if params else url


def _require(request: HttpRequest, *permissions: str) -> None:
    if not all(request.user.has_perm(permission) for permission in permissions):
        raise PermissionDenied


def _status_tiles(counts: dict) -> list[dict]:
    status = "execution__status"
    return [
        {"key": "pending", "label": "Pending", "url": job_list_url(**{status: "PENDING"})},
        {"key": "retrying", "label": "Retrying", "url": job_list_url(**{status: "RETRYING"})},
        {"key": "dispatched", "label": "Dispatched", "url": job_list_url(**{status: "DISPATCHED"})},
        {"key": "running", "label": "Running", "url": job_list_url(**{status: "RUNNING"})},
        {"key": "completed", "label": "Completed", "url": job_list_url(**{status: "COMPLETED"})},
        {
            "key": "dead_letters",
            "label": "Dead letters",
            "url": reverse("jobweaver-dead-letters"),
        },
        {"key": "cancelled", "label": "Cancelled", "url": job_list_url(**{status: "CANCELLED"})},
    ]


def dashboard_context() -> dict:
    now = database_now()
    counts = status_counts(now=now)
    buckets = attempts_per_minute(now=now)
    succeeded = sum(b.succeeded for b in buckets)
    failed = sum(b.failed for b in buckets)
    oldest_due = counts["oldest_due"]
    try:
        database = database_health()
    except DatabaseError as error:  # pragma: no cover - the page itself needs the database
        database = {"ok": False, "error": str(error)}
    tiles = _status_tiles(counts)
    for tile in tiles:
        tile["count"] = counts[tile["key"]]
    return {
        "now": now,
        "counts": counts,
        "tiles": tiles,
        "oldest_due_seconds": (now - oldest_due).total_seconds() if oldest_due else None,
        "due_url": job_list_url(execution__status="DUE", o="-6"),
        "delayed_url": job_list_url(execution__status="DELAYED"),
        "last_hour": {
            "succeeded": succeeded,
            "failed": failed,
            "per_minute": round(succeeded / 60, 2),
            "failure_rate": failed / (succeeded + failed) if succeeded + failed else 0.0,
        },
        "chart": throughput_svg(
            buckets,
            completed_url=job_list_url(execution__status="COMPLETED"),
            failed_url=job_list_url(has_error="yes"),
        ),
        "executors": [
            {**executor, "url": job_list_url(q=executor["worker_id"])}
            for executor in executors_with_work()
        ],
        "kafka": kafka_status(),
        "database": database,
        "failures": recent_failures(),
        "dead_letters_url": reverse("jobweaver-dead-letters"),
        "pauses": pause_list(),
        "limits": concurrency_limit_list(),
        "queues_without_executor": queues_without_executor(),
        "queues": queue_list(),
        "workflows": workflow_counts(),
        "refresh_seconds": REFRESH_SECONDS,
    }


def _figures(context: dict) -> dict:
    """The dashboard's numbers as JSON (for scripts and the page's own refresh)."""
    kafka = context["kafka"]
    return {
        "at": iso(context["now"]),
        "counts": {tile["key"]: tile["count"] for tile in context["tiles"]},
        "oldestDueJobAgeSeconds": context["oldest_due_seconds"],
        "lastHour": context["last_hour"],
        "executors": [
            {
                "workerId": e["worker_id"],
                "slots": e["slots"],
                "dispatched": e["dispatched"],
                "running": e["running"],
                "queues": e["queues"],
            }
            for e in context["executors"]
        ],
        "queuesWithoutExecutor": context["queues_without_executor"],
        "queues": context["queues"],
        "workflows": context["workflows"],
        "kafka": {
            "ok": kafka.ok,
            "error": kafka.error or None,
            "topics": [
                {"topic": t.topic, "endOffset": t.end_offset, "lag": t.lag} for t in kafka.topics
            ],
        },
        "database": {"ok": context["database"]["ok"]},
        "pauses": [pause_to_dict(pause) for pause in context["pauses"]],
        "limits": [limit_to_dict(limit) for limit in context["limits"]],
    }


def dashboard(request: HttpRequest) -> HttpResponse:
    _require(request, VIEW_JOB, VIEW_ALL_JOBS)
    context = {
        **admin.site.each_context(request),
        **dashboard_context(),
        "title": "Operations dashboard",
    }
    return render(request, "dashboard/dashboard.html", context)


def dashboard_live(request: HttpRequest) -> JsonResponse:
    """What the page's script polls: the panels re-rendered on the server, and the figures."""
    _require(request, VIEW_JOB, VIEW_ALL_JOBS)
    context = dashboard_context()
    html = render_to_string("dashboard/_panels.html", context, request=request)
    return JsonResponse({"html": html, "figures": _figures(context)})


@require_http_methods(["POST"])
def pause_resume(request: HttpRequest) -> HttpResponse:
    """The dashboard's Resume button: queue_resume, as the API's DELETE /api/pauses/… does."""
    _require(request, CHANGE_PAUSE)
    scope, name = request.POST.get("scope", ""), request.POST.get("name", "")
    try:
        resumed = queue_resume(scope=scope, name=name)
    except InvalidRequest as error:
        messages.error(request, error.message)
        return HttpResponseRedirect(reverse("jobweaver-dashboard"))
    what = f"{'queue' if scope == 'QUEUE' else 'job type'} {name}"
    if resumed:
        LogEntry.objects.create(
            user_id=request.user.pk,
            content_type=ContentType.objects.get_for_model(Pause),
            object_repr=f"{scope} {name}",
            action_flag=DELETION,
            change_message="Resumed from the dashboard",
        )
        messages.success(request, f"Resumed {what}.")
    else:
        messages.info(request, f"The {what} was not paused: nothing was done.")
    return HttpResponseRedirect(reverse("jobweaver-dashboard"))


@require_http_methods(["GET", "POST"])
def dead_letter_desk(request: HttpRequest) -> HttpResponse:
    """Dead letters grouped by final error, with retry and discard per group or for all.
    A POST without `confirm` shows the confirmation page with the count; with it, acts."""
    _require(request, VIEW_JOB, VIEW_ALL_JOBS)
    can_operate = request.user.has_perm(OPERATE)
    if request.method == "POST":
        if not can_operate:
            raise PermissionDenied
        action = request.POST.get("action", "")
        if action not in DESK_ACTIONS:
            raise PermissionDenied
        error = request.POST.get("error")  # absent: every dead letter
        if error is not None:
            error = error[:GROUP_ERROR_CHARS]
        job_ids = dead_letter_job_ids(error=error)
        scope = "all dead letters" if error is None else f"dead letters with error {error!r}"
        if request.POST.get("confirm") != "yes":
            return render(
                request,
                "dashboard/confirm.html",
                {
                    **admin.site.each_context(request),
                    "title": f"{BULK_ACTIONS[action].label} {len(job_ids)} dead letters?",
                    "action": BULK_ACTIONS[action],
                    "count": len(job_ids),
                    "scope": scope,
                    "sample": job_ids[:20],
                    "fields": [
                        ("action", action),
                        *([("error", error)] if error is not None else []),
                    ],
                    "back_url": reverse("jobweaver-dead-letters"),
                },
            )
        report = jobs_bulk_apply(action=action, job_ids=job_ids, user=request.user)
        log_bulk_action(request, report, scope=scope[:150])
        report_to_operator(request, report)
        return HttpResponseRedirect(reverse("jobweaver-dead-letters"))
    groups = dead_letter_groups()
    for group in groups:
        group["url"] = job_list_url(execution__status="DEAD_LETTER", q=group["error"][:100])
    return render(
        request,
        "dashboard/dead_letters.html",
        {
            **admin.site.each_context(request),
            "title": "Dead-letter desk",
            "groups": groups,
            "total": sum(group["count"] for group in groups),
            "can_operate": can_operate,
            "all_url": job_list_url(execution__status="DEAD_LETTER"),
        },
    )


def view_on_site(request: HttpRequest, content_type_id: int, object_id: str) -> HttpResponse:
    """The admin's "view on site" redirect (`admin/r/<content type>/<id>/`) without its two
    faults: an id that is not a UUID was a 500 (Django's view lets the ValidationError out),
    and its two 404s told an object that exists from one that does not. One 404 for both."""
    try:
        return shortcut(request, content_type_id, object_id)
    except (Http404, ValidationError):
        raise Http404("no such object, or it has no page of its own") from None
