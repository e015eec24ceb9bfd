"""Schedules in the admin: list with the next run, add and change through the services (so the
same validation as the API and the CLI), pause and resume as actions. As everywhere (§17): a
user sees their own schedules, or every one with jobs.view_all_jobs, and acts on another
user's (or an ownerless one) only with jobs.operate_all_jobs."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from jobweaver.core.errors import JobWeaverError
from jobweaver.jobs.selectors import may_operate, owned_by
from jobweaver.schedules.models import Schedule, ScheduleSource
from jobweaver.schedules.services import (
    schedule_create,
    schedule_delete,
    schedule_disable,
    schedule_enable,
    schedule_update,
)
from jobweaver.schedules.validation import clean_job_template, clean_name, clean_rule

RULE_FIELDS = ("cron_expression", "time_zone", "interval_seconds")
OTHER_FIELDS = ("job_template", "misfire_policy", "enabled")


class ScheduleForm(forms.ModelForm):
    class Meta:
        model = Schedule
        fields = [
            "name",
            "cron_expression",
            "time_zone",
            "interval_seconds",
            "job_template",
            "misfire_policy",
            "enabled",
        ]
        help_texts = {
            "cron_expression": "5 fields, evaluated in the time zone; or give an interval",
            "time_zone": "IANA name, e.g. Europe/Berlin (with cron only)",
            "job_template": 'The body of POST /api/jobs, e.g. {"jobType": "SIMULATION", '
            '"payload": {"steps": [{"action": "LOG", "message": "hi"}]}}',
        }

    def clean(self):
        data = super().clean()
        cron = data.get("cron_expression") or None
        data["cron_expression"] = cron
        try:
            if not self.instance.pk:
                clean_name(data.get("name"))
            clean_rule(
                cron_expression=cron,
                time_zone=(data.get("time_zone") or "UTC") if cron else None,
                interval_seconds=data.get("interval_seconds"),
            )
            if "job_template" in data:
                clean_job_template(data["job_template"])
        except JobWeaverError as exc:
            raise forms.ValidationError(exc.message) from None
        return data


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    form = ScheduleForm
    list_display = [
        "name",
        "owner",
        "when",
        "enabled",
        "source",
        "next_run_at",
        "last_slot_at",
        "last_error",
    ]
    list_filter = ["enabled", "source", "misfire_policy"]
    search_fields = ["name", "owner__username"]
    ordering = ["name"]
    readonly_fields = [
        "template_as_json",
        "next_run_at",
        "last_slot_at",
        "last_job_id",
        "last_error",
        "owner",
        "created_at",
        "updated_at",
    ]
    actions = ["pause", "resume"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Schedule]:
        """One's own schedules, or everyone's with jobs.view_all_jobs (§17)."""
        return owned_by(super().get_queryset(request), request.user, owner="owner")

    def _may_act(self, request: HttpRequest, obj: Schedule | None) -> bool:
        # A schedule declared in code (@periodic) changes with the code: shown, never edited.
        # Another user's (or an ownerless one) needs jobs.operate_all_jobs.
        if obj is None:
            return True
        return obj.source != ScheduleSource.CODE and may_operate(request.user, obj.owner_id)

    def has_change_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        return super().has_change_permission(request, obj) and self._may_act(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Schedule | None = None) -> bool:
        return super().has_delete_permission(request, obj) and self._may_act(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        # The name is the schedule's handle in the API and the CLI: fixed once created.
        return [*self.readonly_fields, "name"] if obj is not None else self.readonly_fields

    @admin.display(description="job template (JSON)")
    def template_as_json(self, obj: Schedule) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.job_template, indent=2))

    def save_model(self, request: HttpRequest, obj: Schedule, form, change: bool) -> None:
        data = form.cleaned_data
        cron = data["cron_expression"]
        if cron:
            rule = {"cron_expression": cron, "time_zone": data.get("time_zone") or "UTC"}
        else:
            rule = {"interval_seconds": data.get("interval_seconds")}
        if not change:
            saved = schedule_create(
                name=data["name"],
                **rule,
                job_template=data["job_template"],
                misfire_policy=data["misfire_policy"],
                enabled=data["enabled"],
                owner=request.user,
            )
        else:
            # Only what the form changed: an unchanged rule keeps its next slot.
            changed = set(form.changed_data)
            changes = dict(rule) if changed & {*RULE_FIELDS} else {}
            changes |= {name: data[name] for name in OTHER_FIELDS if name in changed}
            saved = (
                schedule_update(schedule_id=obj.pk, changes=changes, user=request.user)
                if changes
                else obj
            )
        obj.pk, obj.next_run_at = saved.pk, saved.next_run_at
        obj._state.adding = False

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        schedule_delete(schedule_id=obj.pk, user=request.user)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        # Django's "delete selected" says how many it deleted; only the skipped are named here.
        self._each(request, queryset, schedule_delete, "deleted", quiet=True)

    @admin.action(description="Pause selected schedules", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        self._each(request, queryset, schedule_disable, "paused")

    @admin.action(
        description="Resume selected schedules (from their next slot)", permissions=["change"]
    )
    def resume(self, request: HttpRequest, queryset: QuerySet[Schedule]) -> None:
        self._each(request, queryset, schedule_enable, "resumed")

    def _each(self, request: HttpRequest, queryset, action, verb: str, quiet=False) -> None:
        """`action` on each selected schedule as the user; one the user may not act on (another
        user's, one declared in code) is skipped and named."""
        done, skipped = 0, []
        for schedule in queryset:
            try:
                action(schedule_id=schedule.pk, user=request.user)
            except JobWeaverError as exc:
                skipped.append(f"{schedule.name}: {exc.message}")
            else:
                done += 1
        if not quiet:
            messages.success(request, f"{done} schedule(s) {verb}")
        if skipped:
            messages.warning(request, f"{len(skipped)} skipped: " + "; ".join(skipped))
