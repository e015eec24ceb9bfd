"""How a bulk action is reported: to the operator (messages) and in the admin log; and the
throttle of the admin's actions that submit, retry or cancel."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.http import HttpRequest

from jobweaver.accounts.throttle import throttle_take
from jobweaver.jobs.models import Job
from jobweaver.jobs.operations import BulkReport

# Skipped jobs are named per reason up to this many; beyond, only counted.
MAX_IDS_SHOWN = 10


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def refused_by_throttle(request: HttpRequest, kind: str) -> bool:
    """Take a token of `kind` from the user's throttle (§17: the same buckets as the API; one
    per action, however many jobs it touches). Without one, say so and answer True: the action
    must do nothing. Operators are exempt."""
    wait = throttle_take(user=request.user, kind=kind)
    if wait is None:
        return False
    messages.error(request, f"Too many requests: nothing was done; try again in {wait} s.")
    return True


def report_to_operator(request: HttpRequest, report: BulkReport) -> None:
    """A success line with the count done, and a warning with the skipped jobs by reason."""
    if report.done:
        jobs = plural(len(report.done), "job")
        messages.success(request, report.action.done.format(jobs=jobs))
    if report.skipped:
        reasons = []
        for reason, ids in report.skipped.items():
            shown = ", ".join(str(job_id) for job_id in ids[:MAX_IDS_SHOWN])
            more = f" and {len(ids) - MAX_IDS_SHOWN} more" if len(ids) > MAX_IDS_SHOWN else ""
            reasons.append(f"{len(ids)} x {reason} ({shown}{more})")
        messages.warning(
            request, f"Skipped {plural(report.skipped_count, 'job')}: {'; '.join(reasons)}"
        )
    if not report.done and not report.skipped:
        messages.info(request, "No jobs matched: nothing was done.")


def log_bulk_action(request: HttpRequest, report: BulkReport, *, scope: str) -> None:
    """One admin-log entry per job acted on (its History page shows it) and one summary entry
    with the counts and the scope ("3 selected", "all matching status=FAILED")."""
    content_type = ContentType.objects.get_for_model(Job)
    user_id = request.user.pk
    entries = [
        LogEntry(
            user_id=user_id,
            content_type=content_type,
            object_id=str(job_id),
            object_repr=str(job_id),
            action_flag=CHANGE,
            change_message=f"{report.action.label} ({scope})",
        )
        for job_id in report.done
    ]
    entries.append(
        LogEntry(
            user_id=user_id,
            content_type=content_type,
            object_id=None,
            object_repr=f"{report.action.label}: {scope}"[:200],
            action_flag=CHANGE,
            change_message=report.summary(),
        )
    )
    LogEntry.objects.bulk_create(entries)
