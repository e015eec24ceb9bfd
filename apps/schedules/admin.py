"""Schedules in the admin: list with the next run, add and change through the services (so the
same validation as the API and the CLI), pause and resume as actions. As everywhere (§17): a
user sees their own schedules, or every one with jobs.view_all_jobs, and acts on another
user's (or an ownerless one) only with jobs.operate_all_jobs."""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html

from jobweaver.core.errors import JobWeaverError
from jobweaver.jobs.selectors import may_operate, owned_by
from jobweaver.schedules.models import Schedule, ScheduleSource
from jobweaver.schedules.services import (
    ADD_JOB,
    schedule_create,
    schedule_delete,
    schedule_disable,
    schedule_enable,
    schedule_update,
)

RULE_FIELDS = ("cron_expression", "time_zone", "interval_seconds")
OTHER_FIELDS = ("job_template", "misfire_policy", "enabled")


class ScheduleForm(forms.ModelForm):
    """The add and change form. It saves through the services as it validates: then every
    refusal of theirs (a bad rule or template, a permission the user lacks, a name taken) is an
    error on the form rather than a server error after it. The admin's change view runs in one
    transaction, so a form that turns out invalid after all stores nothing (`_post_clean`)."""

    request: HttpRequest  # set by ScheduleAdmin.get_form

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
            '"payload": {"steps": [{"action": "LOG", "message": "hi"}]}}. Changing the rule or '
            "the template makes you the owner: it submits as you from then on.",
        }

    def clean(self):
        data = super().clean()
        data["cron_expression"] = data.get("cron_expression") or None  # empty: not a cron rule
        self._saved = False
        if self.errors:  # a field is already wrong: nothing to save
            return data
        try:
            self.instance = self._save(data)
        except JobWeaverError as exc:
            raise forms.ValidationError(exc.message) from None
        return data

    def _save(self, data: dict) -> Schedule:
        cron, interval = data["cron_expression"], data.get("interval_seconds")
        rule: dict = {}
        if cron is not None or interval is None:  # neither, or both: the service says which
            zone = (data.get("time_zone") or "UTC") if cron is not None else None
            rule |= {"cron_expression": cron, "time_zone": zone}
        if interval is not None:
            rule["interval_seconds"] = interval
        user = self.request.user
        if self.instance._state.adding:  # a new schedule (its UUID is there already)
            saved = schedule_create(
                name=data.get("name"),
                **rule,
                job_template=data.get("job_template"),
                misfire_policy=data.get("misfire_policy"),
                enabled=data.get("enabled"),
                owner=user,
            )
        else:
            # Only what the form changed: an unchanged rule keeps its next slot.
            changed = set(self.changed_data)
            changes = dict(rule) if changed & {*RULE_FIELDS} else {}
            changes |= {name: data[name] for name in OTHER_FIELDS if name in changed}
            if not changes:
                return self.instance
            saved = schedule_update(schedule_id=self.instance.pk, changes=changes, user=user)
        self._saved = True
        return saved

    def _post_clean(self):
        super()._post_clean()
        if self.errors and getattr(self, "_saved", False):
            transaction.set_rollback(True)  # the admin's transaction: the save is undone


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

    def get_form(self, request: HttpRequest, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        form.request = request  # a class of this request's own (modelform_factory)
        return form

    def has_add_permission(self, request: HttpRequest) -> bool:
        # A schedule submits jobs as its owner: adding one needs jobs.add_job too (§17).
        return super().has_add_permission(request) and request.user.has_perm(ADD_JOB)

    def save_model(self, request: HttpRequest, obj: Schedule, form, change: bool) -> None:
        """Saved already, through the services, when the form was validated."""

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
