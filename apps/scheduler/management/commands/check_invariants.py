"""`manage.py check_invariants`: audit job execution (apps/scheduler/invariants.py).

Prints one line per violation and exits 1 if there is any, 0 when every invariant holds, 2 on
bad input.
"""

from __future__ import annotations

import uuid

from django.utils.dateparse import parse_datetime

from jobweaver.core.commands import EXIT_FAILED, CommandExit, JobWeaverCommand
from jobweaver.scheduler.invariants import DEFAULT_SLACK_SECONDS, check_invariants


class Command(JobWeaverCommand):
    help = (
        "Check the invariants of job execution: every job has an execution, at most one SUCCESS "
        "per job, attempt numbers 1..n, no expired lease left unrescued, one dead-letter event "
        "per dead-lettering. Exit status: 0 all hold, 1 violations (one line each), 2 bad input."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--job-ids", nargs="+", metavar="ID", help="check only these jobs (default: all)"
        )
        parser.add_argument(
            "--since", metavar="ISO", help="check only jobs created at or after this time"
        )
        parser.add_argument(
            "--slack",
            type=float,
            default=DEFAULT_SLACK_SECONDS,
            metavar="SECONDS",
            help="how late beyond one rescue interval an expired lease may still be live "
            f"(default {DEFAULT_SLACK_SECONDS:g})",
        )

    def handle(self, *args, **options):
        job_ids = since = None
        try:
            if options["job_ids"] is not None:
                job_ids = [uuid.UUID(raw) for raw in options["job_ids"]]
        except ValueError:
            raise CommandExit(
                f"--job-ids: not a job id in {' '.join(options['job_ids'])}"
            ) from None
        if options["since"] is not None:
            try:
                since = parse_datetime(options["since"])
            except ValueError:
                since = None
            if since is None or since.tzinfo is None:
                raise CommandExit(
                    f"--since: expected an ISO-8601 time with a zone, got {options['since']!r}"
                )
        violations = check_invariants(job_ids=job_ids, since=since, slack_seconds=options["slack"])
        for violation in violations:
            self.stdout.write(str(violation))
        if violations:
            self.stderr.write(f"check_invariants: {len(violations)} violation(s)")
            raise CommandExit(returncode=EXIT_FAILED)  # the summary line above says why
        self.stdout.write("all invariants hold")
