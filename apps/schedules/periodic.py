"""`@periodic`: schedules declared in code, deployed with it (ARCHITECTURE §13a).

    from jobweaver.tasks import periodic, task

    @periodic(cron="0 3 * * *", timezone="Europe/Berlin")
    @task
    def nightly_digest() -> None: ...

The decorator only records the declaration (this process's, in `declarations()`): importing a
tasks module writes nothing. `schedules_sync_code` (apps/schedules/services.py) makes the
database follow the code — on `post_migrate` and when beat or a scheduler worker starts, never
in `AppConfig.ready()` — and code schedules are read-only everywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jobweaver.jobs.python_tasks import priority as task_priority
from jobweaver.jobs.python_tasks.compat import TASK_CLASSES
from jobweaver.schedules import slots
from jobweaver.schedules.validation import clean_misfire_policy, clean_name, clean_rule


@dataclass(frozen=True)
class Periodic:
    """One schedule declared in code."""

    name: str
    task_path: str
    cron_expression: str | None
    time_zone: str | None
    interval_seconds: int | None
    misfire_policy: str
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)
    # The task's own routing and limits, copied into the template as a submission states them.
    template_fields: dict = field(default_factory=dict)

    @property
    def job_template(self) -> dict:
        """The schedule's job template: a TASK job of the task with these arguments."""
        payload = {"task": self.task_path, "args": self.args, "kwargs": self.kwargs}
        return {"jobType": "TASK", "payload": payload, **self.template_fields}


_declared: dict[str, Periodic] = {}


def periodic(
    *,
    cron: str | None = None,
    interval_seconds: int | None = None,
    timezone: str = "UTC",
    args: list | tuple = (),
    kwargs: dict[str, Any] | None = None,
    misfire: str = slots.SKIP,
    name: str | None = None,
):
    """Declare a schedule for the task below it (`@periodic(...)` above `@task`): `cron` (in
    `timezone`) or `interval_seconds`, the call's `args` and `kwargs`, the `misfire` policy and
    a `name` (default: the function's name, following the schedule name pattern). A bad
    declaration raises where it is written."""

    def wrapper(task):
        if not isinstance(task, TASK_CLASSES):
            raise TypeError("@periodic goes above @task: it declares a schedule for a task")
        schedule_name = clean_name(name or task.func.__name__)
        rule = clean_rule(
            cron_expression=cron,
            time_zone=timezone if cron is not None else None,
            interval_seconds=interval_seconds,
        )
        declared = Periodic(
            name=schedule_name,
            task_path=task.module_path,
            cron_expression=rule.cron_expression,
            time_zone=rule.time_zone,
            interval_seconds=rule.interval_seconds,
            misfire_policy=clean_misfire_policy(misfire),
            args=list(args),
            kwargs=dict(kwargs or {}),
            template_fields=_template_fields(task),
        )
        other = _declared.get(schedule_name)
        if other is not None and other.task_path != declared.task_path:
            raise ValueError(
                f"@periodic name {schedule_name!r} is declared for both {other.task_path} and "
                f"{declared.task_path}: give one a name of its own"
            )
        _declared[schedule_name] = declared
        return task

    return wrapper


def _template_fields(task) -> dict:
    fields: dict = {
        "queueName": task.queue_name,
        "priority": task_priority.to_jobweaver(task.priority),
    }
    for option, request_field in (
        ("max_retries", "maxRetryCount"),
        ("timeout_seconds", "timeoutSeconds"),
    ):
        value = getattr(task, option, None)
        if value is not None:
            fields[request_field] = value
    return fields


def declarations() -> dict[str, Periodic]:
    """The schedules this process's code declares, by name (its tasks modules are imported at
    start-up by the task registry)."""
    return dict(_declared)
