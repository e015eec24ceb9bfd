"""`manage.py schedules list|create|show|enable|disable|delete|fire`: recurring jobs from the
command line, through the same services as the API and the admin.

  schedules list [--owner USERNAME]                 by name, with their owners
  schedules create NAME (--cron EXPR [--tz ZONE] | --interval SECONDS)
                   (--template JSON | --template-file PATH) [--misfire SKIP|CATCH_UP_ONCE]
                   [--disabled]
  schedules show NAME [--owner USERNAME]
  schedules enable|disable|delete NAME [--owner USERNAME]
  schedules fire [--now ISO]                        submit the due slots now (beat does this
                                                    every JOBWEAVER_SCHEDULES_INTERVAL_SECONDS);
                                                    --now injects the clock, for tests and drills

Each takes --json. Schedules created here belong to no user: their jobs are submitted as a
trusted operator's. Names are per owner (ARCHITECTURE §17): NAME is an ownerless schedule's
(made here, or declared in code) unless --owner names the user whose schedule it is. The
command line is trusted: enabling or disabling a user's schedule here leaves it theirs. Exit
codes: 0 done; 2 bad input (an invalid definition, an unknown schedule, a malformed time), and
nothing was changed.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from jobweaver.core.commands import CommandExit, JobWeaverCommand
from jobweaver.core.jsonutil import loads_strict
from jobweaver.core.timeutil import iso
from jobweaver.schedules.selectors import schedule_get, schedule_list, schedule_to_dict
from jobweaver.schedules.services import (
    Firing,
    schedule_create,
    schedule_delete,
    schedule_disable,
    schedule_enable,
    schedules_fire,
)
from jobweaver.schedules.slots import MISFIRE_POLICIES

SUBCOMMANDS = ("list", "create", "show", "enable", "disable", "delete", "fire")


class Command(JobWeaverCommand):
    help = (
        "Recurring jobs: list, create, show, enable, disable, delete, fire (each with --json). "
        "Exit status: 0 done, 2 bad input (nothing changed)."
    )

    def add_arguments(self, parser):
        commands = parser.add_subparsers(
            dest="subcommand", metavar="{" + ",".join(SUBCOMMANDS) + "}"
        )
        commands.required = True
        listing = commands.add_parser("list", help="every schedule, by name")
        listing.add_argument("--owner", metavar="USERNAME", help="only this user's schedules")
        create = commands.add_parser("create", help="create a schedule")
        create.add_argument("name")
        rule = create.add_mutually_exclusive_group(required=True)
        rule.add_argument("--cron", help='5-field cron expression, e.g. "30 2 * * *"')
        rule.add_argument("--interval", type=int, metavar="SECONDS", help="every N seconds")
        create.add_argument("--tz", help="IANA time zone of --cron (default UTC)")
        template = create.add_mutually_exclusive_group(required=True)
        template.add_argument("--template", help="the job request as JSON (POST /api/jobs body)")
        template.add_argument("--template-file", type=Path, help="a file holding that JSON")
        create.add_argument("--misfire", choices=MISFIRE_POLICIES, default=MISFIRE_POLICIES[0])
        create.add_argument("--disabled", action="store_true", help="create it paused")
        subs = [listing, create]
        for name, text in (
            ("show", "one schedule"),
            ("enable", "resume at the next slot after now"),
            ("disable", "pause"),
            ("delete", "delete (its jobs stay)"),
        ):
            sub = commands.add_parser(name, help=text)
            sub.add_argument("name")
            sub.add_argument(
                "--owner", metavar="USERNAME", help="the user whose schedule it is (default: none)"
            )
            subs.append(sub)
        fire = commands.add_parser("fire", help="submit the jobs of every due slot now")
        fire.add_argument("--now", help="ISO-8601 time with a zone to fire at (default: now)")
        subs.append(fire)
        for sub in subs:
            sub.add_argument("--json", action="store_true", help="machine-readable output")
            sub.error = self._usage_error  # one line and exit 2, as for the main parser

    def handle(self, *args, **options):
        getattr(self, f"_{options['subcommand']}")(options)

    def _print(self, options, data, text: str) -> None:
        self.stdout.write(json.dumps(data, indent=2) if options["json"] else text)

    def _list(self, options) -> None:
        schedules = schedule_list(owner=options["owner"])
        rows = [schedule_to_dict(s) for s in schedules]
        lines = [f"{'NAME':30}  {'OWNER':16}  {'ENABLED':7}  {'NEXT RUN':24}  WHEN"] + [
            f"{row['name']:30}  {row['owner'] or '-':16}  {'yes' if row['enabled'] else 'no':7}  "
            f"{row['nextRunAt'] or '-':24}  {s.when}"
            for s, row in zip(schedules, rows, strict=True)
        ]
        self._print(options, rows, "\n".join(lines) if schedules else "no schedules")

    def _show(self, options) -> None:
        schedule = schedule_get(name=options["name"], owner=options["owner"])
        self._print(options, schedule_to_dict(schedule), _describe(schedule_to_dict(schedule)))

    def _create(self, options) -> None:
        if options["tz"] is not None and options["cron"] is None:
            raise CommandExit("--tz goes with --cron")
        if options["template_file"] is not None:
            try:
                raw = options["template_file"].read_text()
            except OSError as exc:
                raise CommandExit(f"cannot read --template-file: {exc.strerror}") from None
        else:
            raw = options["template"]
        schedule = schedule_create(
            name=options["name"],
            cron_expression=options["cron"],
            time_zone=options["tz"],
            interval_seconds=options["interval"],
            job_template=loads_strict(raw, source="template"),
            misfire_policy=options["misfire"],
            enabled=not options["disabled"],
        )
        data = schedule_to_dict(schedule)
        self._print(options, data, f"schedule {schedule.name} created\n{_describe(data)}")

    def _enable(self, options) -> None:
        data = schedule_to_dict(schedule_enable(name=options["name"], owner=options["owner"]))
        self._print(options, data, f"schedule {data['name']} enabled, next run {data['nextRunAt']}")

    def _disable(self, options) -> None:
        data = schedule_to_dict(schedule_disable(name=options["name"], owner=options["owner"]))
        self._print(options, data, f"schedule {data['name']} disabled")

    def _delete(self, options) -> None:
        schedule_delete(name=options["name"], owner=options["owner"])
        self._print(options, {"deleted": options["name"]}, f"schedule {options['name']} deleted")

    def _fire(self, options) -> None:
        firings = schedules_fire(now=_parse_now(options["now"]))
        rows = [_firing_to_dict(firing) for firing in firings]
        lines = []
        for row in rows:
            lines += [
                f"{row['schedule']}: job {job['jobId']} for {job['slot']}"
                for job in row["submitted"]
            ]
            if row["missedFrom"]:
                lines.append(
                    f"{row['schedule']}: missed {row['missedFrom']} .. {row['missedUntil']}"
                )
            if row["error"]:
                lines.append(f"{row['schedule']}: error: {row['error']}")
        submitted = sum(len(row["submitted"]) for row in rows)
        lines.append(f"{submitted} job(s) submitted for {len(rows)} due schedule(s)")
        self._print(options, rows, "\n".join(lines))


def _parse_now(raw: str | None) -> datetime | None:
    if raw is None:
        return None
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise CommandExit(f"--now must be an ISO-8601 time with a zone, got {raw!r}")
    return parsed


def _firing_to_dict(firing: Firing) -> dict:
    def jobs(pairs):
        return [{"slot": iso(slot), "jobId": str(job_id)} for slot, job_id in pairs]

    return {
        "schedule": firing.schedule,
        "submitted": jobs(firing.submitted),
        "replayed": jobs(firing.replayed),
        "missedFrom": iso(firing.missed_from),
        "missedUntil": iso(firing.missed_until),
        "error": firing.error or None,
        "nextRunAt": iso(firing.next_run_at),
    }


def _describe(data: dict) -> str:
    when = (
        f"cron {data['cron']} ({data['timeZone']})"
        if data["cron"] is not None
        else f"every {data['intervalSeconds']} s"
    )
    return "\n".join(
        [
            f"schedule {data['name']}: {when}, misfire {data['misfirePolicy']}, "
            f"{'enabled' if data['enabled'] else 'disabled'}",
            f"  owner        {data['owner'] or '- (trusted: command line or code)'}",
            f"  next run     {data['nextRunAt'] or '-'}",
            f"  last slot    {data['lastSlotAt'] or '-'} (job {data['lastJobId'] or '-'})",
            f"  last error   {data['lastError'] or '-'}",
            f"  template     {json.dumps(data['template'])}",
        ]
    )
