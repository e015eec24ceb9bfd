"""`manage.py jobs list|show|retry|cancel`: the person on call's command line (ARCHITECTURE §9).

  jobs list [--status S …] [--type T] [--limit N]   newest first
  jobs show ID                                        the job detail, attempts and errors
  jobs retry ID… | --all-failed                       FAILED or CANCELLED → PENDING
  jobs cancel ID…                                     at once, or at the next checkpoint

Each takes --json, and --as USERNAME to run as that user (§17): then it sees and acts on what
the user may in the API — their own jobs, or everyone's with jobs.view_all_jobs (seeing) and
jobs.operate_all_jobs (acting); another user's job is "no such job". Without --as the command
line is trusted and reaches every job. Retry and cancel act on each job through the same
services as the API and the admin, and report the done and the skipped (with why).

Exit codes: 0 done (every job acted on); 1 some job's state did not allow it (the others were
still acted on); 2 bad input — a malformed or unknown id, an unknown status — and nothing was
changed.
"""

from __future__ import annotations

import json

from jobweaver.core.commands import EXIT_FAILED, CommandExit, JobWeaverCommand, user_named
from jobweaver.core.errors import JobNotFound
from jobweaver.core.timeutil import iso
from jobweaver.jobs.models import Job, JobType
from jobweaver.jobs.operations import BulkReport, jobs_bulk_apply
from jobweaver.jobs.selectors import job_detail, job_list, owned_by, parse_job_id
from jobweaver.scheduler.models import ExecutionStatus

LIST_LIMIT_DEFAULT = 50
LIST_LIMIT_MAX = 1000


class Command(JobWeaverCommand):
    help = (
        "Inspect and act on jobs: list, show, retry, cancel (each with --json). Exit status: "
        "0 done, 1 a job's state did not allow the action, 2 bad input (nothing changed)."
    )

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="subcommand", metavar="{list,show,retry,cancel}")
        commands.required = True

        listing = commands.add_parser("list", help="list jobs, newest first")
        listing.add_argument(
            "--status", action="append", choices=ExecutionStatus.values, help="repeatable"
        )
        listing.add_argument("--type", dest="job_type", choices=JobType.values)
        listing.add_argument(
            "--limit", type=int, default=LIST_LIMIT_DEFAULT, help=f"at most {LIST_LIMIT_MAX}"
        )
        show = commands.add_parser("show", help="one job's detail with its attempts")
        show.add_argument("job_id")
        retry = commands.add_parser("retry", help="retry FAILED or CANCELLED jobs")
        retry.add_argument("job_ids", nargs="*", metavar="ID")
        retry.add_argument("--all-failed", action="store_true", help="every FAILED job")
        cancel = commands.add_parser("cancel", help="cancel jobs")
        cancel.add_argument("job_ids", nargs="+", metavar="ID")
        for sub in (listing, show, retry, cancel):
            sub.add_argument("--json", action="store_true", help="machine-readable output")
            sub.add_argument(
                "--as",
                dest="as_user",
                metavar="USERNAME",
                help="run as this user: only what they may see and do (§17)",
            )
            sub.error = self._usage_error  # one line and exit 2, as for the main parser

    def handle(self, *args, **options):
        options["user"] = user_named(options["as_user"])
        handler = {
            "list": self._list,
            "show": self._show,
            "retry": self._retry,
            "cancel": self._cancel,
        }[options["subcommand"]]
        handler(options)

    # --- reading ------------------------------------------------------------------------------

    def _list(self, options) -> None:
        limit = options["limit"]
        if not 1 <= limit <= LIST_LIMIT_MAX:
            raise CommandExit(f"--limit must be 1-{LIST_LIMIT_MAX}, got {limit}")
        statuses = options["status"] or [None]
        jobs: list[Job] = []
        for status in statuses:
            page, _ = job_list(
                user=options["user"], status=status, job_type=options["job_type"], size=limit
            )
            jobs += page
        jobs = sorted(jobs, key=lambda job: (job.created_at, job.id), reverse=True)[:limit]
        if options["json"]:
            self.stdout.write(json.dumps([_summary(job) for job in jobs], indent=2))
            return
        if not jobs:
            self.stdout.write("no jobs")
            return
        self.stdout.write(
            f"{'ID':36}  {'STATUS':10}  {'TYPE':10}  PRI  RETRIES  {'CREATED':24}  LAST ERROR"
        )
        for job in jobs:
            row = _summary(job)
            retries = f"{row['retryCount']}/{row['maxRetryCount']}"
            self.stdout.write(
                f"{row['jobId']:36}  {row['status']:10}  {row['jobType']:10}  "
                f"{row['priority']:>3}  {retries:>7}  {row['createdAt']:24}  "
                f"{(row['lastError'] or '')[:60]}"
            )

    def _show(self, options) -> None:
        detail = job_detail(job_id=options["job_id"], user=options["user"])  # JobNotFound: exit 2
        if options["json"]:
            self.stdout.write(json.dumps(detail, indent=2))
            return
        progress = detail["progress"]
        lines = [
            f"job {detail['jobId']} ({detail['jobType']}) {detail['status']}",
            f"  trace id     {detail['traceId']}",
            f"  priority     {detail['priority']}",
            f"  retries      {detail['retryCount']} / {detail['maxRetryCount']}",
            f"  progress     {progress['stepsCompleted']} / {progress['totalSteps']}",
            f"  created      {detail['createdAt']}",
            f"  next run     {detail['nextRunAt'] or '-'}",
            f"  finished     {detail['finishedAt'] or '-'}",
            f"  last error   {detail['lastError'] or '-'}",
            f"  payload      {json.dumps(detail['payload'])}",
        ]
        if "result" in detail:
            lines.append(f"  result       {json.dumps(detail['result'])}")
        lines.append(f"  attempts     {len(detail['attempts'])}")
        for attempt in detail["attempts"]:
            error = f" - {attempt['errorMessage']}" if attempt["errorMessage"] else ""
            lines.append(
                f"    #{attempt['attempt']} {attempt['outcome']:9} {attempt['workerId']} "
                f"{attempt['startedAt']} → {attempt['finishedAt'] or '…'}{error}"
            )
        self.stdout.write("\n".join(lines))

    # --- acting -------------------------------------------------------------------------------

    def _retry(self, options) -> None:
        if options["all_failed"] == bool(options["job_ids"]):
            raise CommandExit("give job ids or --all-failed (not both)")
        user = options["user"]
        if options["all_failed"]:
            failed = Job.objects.filter(execution__status=ExecutionStatus.FAILED)
            ids = list(owned_by(failed, user).order_by("created_at").values_list("id", flat=True))
        else:
            ids = _existing_ids(options["job_ids"], user)
        self._report(jobs_bulk_apply(action="retry", job_ids=ids, user=user), options)

    def _cancel(self, options) -> None:
        user = options["user"]
        ids = _existing_ids(options["job_ids"], user)
        self._report(jobs_bulk_apply(action="cancel", job_ids=ids, user=user), options)

    def _report(self, report: BulkReport, options) -> None:
        if options["json"]:
            self.stdout.write(
                json.dumps(
                    {
                        "action": report.action.name,
                        "done": [str(job_id) for job_id in report.done],
                        "skipped": [
                            {"jobId": str(job_id), "reason": reason}
                            for reason, ids in report.skipped.items()
                            for job_id in ids
                        ],
                    },
                    indent=2,
                )
            )
        else:
            for job_id in report.done:
                self.stdout.write(f"job {job_id} {report.action.verb}")
            for reason, ids in report.skipped.items():
                for job_id in ids:
                    self.stdout.write(f"job {job_id} skipped: {reason}")
            self.stdout.write(report.summary())
        if report.skipped:
            raise CommandExit(returncode=EXIT_FAILED)


def _existing_ids(raw_ids: list[str], user) -> list:
    """Parse every id and check that each job exists, and that `user` (None: the trusted
    command line) may see it, before acting on any: a typo changes nothing (exit 2)."""
    ids = [parse_job_id(raw) for raw in raw_ids]
    found = set(owned_by(Job.objects.filter(id__in=ids), user).values_list("id", flat=True))
    missing = [str(job_id) for job_id in ids if job_id not in found]
    if missing:
        raise JobNotFound(f"no such job: {', '.join(missing)}")
    return list(dict.fromkeys(ids))


def _summary(job: Job) -> dict:
    execution = job.execution
    return {
        "jobId": str(job.id),
        "jobType": job.job_type,
        "status": execution.status,
        "priority": job.priority,
        "retryCount": execution.retry_count,
        "maxRetryCount": execution.max_retries,
        "attemptCount": execution.attempt_count,
        "nextRunAt": iso(execution.next_run_at)
        if execution.status == ExecutionStatus.PENDING
        else None,
        "lastError": execution.last_error or None,
        "createdAt": iso(job.created_at),
    }
