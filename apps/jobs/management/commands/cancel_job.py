"""`manage.py cancel_job <job_id>`: cancel a job, as POST /api/jobs/{id}/cancel and the admin's
Cancel action do (same service).

A PENDING or DISPATCHED job is CANCELLED at once; a RUNNING job is asked to stop and its worker
records CANCELLED at its next checkpoint (within a second during a SLEEP step).

Exit codes: 0 cancelled or cancellation requested; 1 the job's state does not allow it (it has
already ended); 2 a malformed or unknown job id. Errors are one line on stderr.
"""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from apps.core.errors import InvalidStateTransition, JobNotFound
from apps.jobs.selectors import job_get
from apps.jobs.services import job_cancel


class Command(BaseCommand):
    help = (
        "Cancel a job: PENDING and DISPATCHED jobs at once, a RUNNING job at its next "
        "checkpoint. Exit status: 0 done, 1 the job has already ended, 2 malformed or unknown id."
    )

    def add_arguments(self, parser):
        parser.add_argument("job_id", help="the job's id (a UUID)")

    def handle(self, *args, **options):
        try:
            job_cancel(job_id=options["job_id"])
        except JobNotFound as exc:
            self._fail(exc.message, 2)
        except InvalidStateTransition as exc:
            self._fail(exc.message, 1)
        job = job_get(job_id=options["job_id"])
        if job.execution.status == "RUNNING":
            self.stdout.write(
                f"job {job.id}: cancellation requested; it stops at its next checkpoint"
            )
        else:
            self.stdout.write(f"job {job.id} {job.execution.status}")

    def _fail(self, message: str, code: int) -> None:
        if self._called_from_command_line:
            self.stderr.write(f"cancel_job: error: {message}")
            sys.exit(code)
        raise CommandError(message, returncode=code)
