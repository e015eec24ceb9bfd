"""Recurring jobs: a schedule submits its job template at each of its slots (apps/schedules/
slots.py) through the normal submission service."""

import uuid

from django.db import models

from jobweaver.conf import settings
from jobweaver.schedules import slots


class MisfirePolicy(models.TextChoices):
    SKIP = slots.SKIP, "Skip missed slots"
    CATCH_UP_ONCE = slots.CATCH_UP_ONCE, "Catch up once (the latest missed slot)"


class ScheduleSource(models.TextChoices):
    API = "api", "Made through the API, the CLI or the admin"
    CODE = "code", "Declared in code with @periodic (read-only elsewhere)"


class Schedule(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Unique per owner, and among the ownerless ones (see Meta): the API addresses a schedule
    # by name within its owner's (ARCHITECTURE §17).
    name = models.SlugField(max_length=100)
    # Exactly one of a cron expression (with its IANA time zone) or an interval: see Meta.
    cron_expression = models.CharField(  # noqa: DJ001 (NULL: "not a cron schedule")
        max_length=slots.MAX_CRON_CHARS, null=True, blank=True
    )
    time_zone = models.CharField(max_length=64, default="UTC")
    interval_seconds = models.PositiveIntegerField(null=True, blank=True)
    # The body a client would POST to /api/jobs, validated on every save and again at each
    # firing (the limits may have changed since).
    job_template = models.JSONField()
    misfire_policy = models.CharField(
        max_length=16, choices=MisfirePolicy.choices, default=MisfirePolicy.SKIP
    )
    enabled = models.BooleanField(default=True)
    # Where it is defined: a code schedule follows its @periodic declaration (§13a).
    source = models.CharField(
        max_length=8, choices=ScheduleSource.choices, default=ScheduleSource.API
    )
    # The earliest slot not yet submitted (UTC); NULL while disabled.
    next_run_at = models.DateTimeField(null=True, blank=True)
    last_slot_at = models.DateTimeField(null=True, blank=True)
    # A plain id, not a foreign key: retention prunes finished jobs, schedules stay.
    last_job_id = models.UUIDField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    # Jobs are submitted as this user, with their permissions, cap and throttle: whoever created
    # the schedule, or last changed what it submits (§17). A user's schedules go with the user.
    # NULL: made from the command line or declared in code (@periodic), trusted.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        indexes = [
            models.Index(
                fields=["next_run_at"],
                name="jw_schedule_due",
                condition=models.Q(enabled=True),
            )
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "name"],
                condition=models.Q(owner__isnull=False),
                name="jw_schedule_name_per_owner",
            ),
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(owner__isnull=True),
                name="jw_schedule_name_ownerless",
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(cron_expression__isnull=False, interval_seconds__isnull=True)
                    | models.Q(cron_expression__isnull=True, interval_seconds__gte=1)
                ),
                name="jw_schedule_cron_xor_interval",
            ),
            models.CheckConstraint(
                condition=models.Q(enabled=False) | models.Q(next_run_at__isnull=False),
                name="jw_schedule_enabled_has_next_run",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def rule(self) -> slots.Rule:
        if self.interval_seconds is not None:
            return slots.IntervalRule(self.interval_seconds)
        return slots.CronRule(self.cron_expression, self.time_zone)

    @property
    def when(self) -> str:
        """The rule in words, for lists: `cron 30 2 * * * (Europe/Berlin)` or `every 60 s`."""
        if self.interval_seconds is not None:
            return f"every {self.interval_seconds} s"
        return f"cron {self.cron_expression} ({self.time_zone})"
