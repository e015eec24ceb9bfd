"""`manage.py cancel_job <job_id>`: cancel a job, as POST /api/jobs/{id}/cancel and the admin's
Cancel action do (same service).

A PENDING or DISPATCHED job is CANCELLED at once; a RUNNING job is asked to stop and its worker
records CANCELLED at its next checkpoint (within a second during a SLEEP step).

Exit codes: 0 cancelled or cancellation requested; 1 the job's state does not allow it (it has
already ended); 2 a malformed or unknown job id. Errors are one line on stderr.
"""

from __future__ import annotations

from jobweaver.core.commands import JobWeaverCommand
from jobweaver.jobs.selectors import job_get
from jobweaver.jobs.services import job_cancel
from jobweaver.scheduler.models import ExecutionStatus


class Command(JobWeaverCommand):
    help = (
        "Cancel a job: PENDING and DISPATCHED jobs at once, a RUNNING job at its next "
        "checkpoint. Exit status: 0 done, 1 the job has already ended, 2 malformed or unknown id."
    )

    def add_arguments(self, parser):
        parser.add_argument("job_id", help="the job's id (a UUID)")

    def handle(self, *args, **options):
        # JobNotFound exits 2, InvalidStateTransition 1 (apps/core/commands.py).
        job_cancel(job_id=options["job_id"])
        job = job_get(job_id=options["job_id"])
        if job.execution.status == ExecutionStatus.RUNNING:
            self.stdout.write(
                f"job {job.id}: cancellation requested; it stops at its next checkpoint"
            )
        else:
            self.stdout.write(f"job {job.id} {job.execution.status}")
