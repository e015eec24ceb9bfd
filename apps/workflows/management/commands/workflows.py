"""`manage.py workflows list|show|cancel|retry`: workflows from the command line (ARCHITECTURE
§16), through the same services as the API and the admin.

  workflows list [--status S] [--limit N]   newest first
  workflows show ID                         its jobs, their statuses and dependencies
  workflows cancel ID                       every unfinished job → CANCELLED
  workflows retry ID                        retry its FAILED jobs (their dependents wait again)

Each takes --json. Exit codes: 0 done; 1 the workflow's state does not allow it (cancel of a
finished one, retry without a failed job); 2 bad input (an unknown workflow or status), and
nothing was changed.
"""

from __future__ import annotations

import json

from jobweaver.core.commands import CommandExit, JobWeaverCommand
from jobweaver.workflows.selectors import STATUSES, workflow_get, workflow_list, workflow_to_dict
from jobweaver.workflows.services import workflow_cancel, workflow_retry_failed

SUBCOMMANDS = ("list", "show", "cancel", "retry")


class Command(JobWeaverCommand):
    help = (
        "Workflows: list, show, cancel, retry (each with --json). Exit status: 0 done, 1 the "
        "workflow's state does not allow it, 2 bad input (nothing changed)."
    )

    def add_arguments(self, parser):
        commands = parser.add_subparsers(
            dest="subcommand", metavar="{" + ",".join(SUBCOMMANDS) + "}"
        )
        commands.required = True
        listing = commands.add_parser("list", help="workflows, newest first")
        listing.add_argument("--status", choices=STATUSES)
        listing.add_argument("--limit", type=int, default=20, help="at most N (default 20)")
        subs = [listing]
        for name, text in (
            ("show", "one workflow with its jobs"),
            ("cancel", "cancel every unfinished job"),
            ("retry", "retry its FAILED jobs"),
        ):
            sub = commands.add_parser(name, help=text)
            sub.add_argument("id")
            subs.append(sub)
        for sub in subs:
            sub.add_argument("--json", action="store_true", help="machine-readable output")
            sub.error = self._usage_error  # one line and exit 2, as for the main parser

    def handle(self, *args, **options):
        getattr(self, f"_{options['subcommand']}")(options)

    def _print(self, options, data, text: str) -> None:
        self.stdout.write(json.dumps(data, indent=2) if options["json"] else text)

    def _list(self, options) -> None:
        if not 1 <= options["limit"] <= 1000:
            raise CommandExit("--limit is 1 to 1000")
        workflows, total = workflow_list(status=options["status"], size=options["limit"])
        rows = [workflow_to_dict(w, jobs=False) for w in workflows]
        lines = [f"{'ID':36}  {'STATUS':9}  {'UNFINISHED':10}  {'FAILED':6}  NAME"] + [
            f"{r['workflowId']:36}  {r['status']:9}  {r['unfinishedJobs']:10}  "
            f"{r['failedJobs']:6}  {r['name']}"
            for r in rows
        ]
        text = "\n".join(lines) + f"\n{len(rows)} of {total}" if rows else "no workflows"
        self._print(options, rows, text)

    def _show(self, options) -> None:
        data = workflow_to_dict(workflow_get(workflow_id=options["id"]))
        self._print(options, data, _describe(data))

    def _cancel(self, options) -> None:
        workflow = workflow_get(workflow_id=options["id"])
        data = workflow_to_dict(workflow_cancel(workflow_id=workflow.id))
        self._print(
            options, data, f"workflow {data['workflowId']} {data['status']}\n" + _jobs(data)
        )

    def _retry(self, options) -> None:
        workflow = workflow_get(workflow_id=options["id"])
        retried = workflow_retry_failed(workflow_id=workflow.id)
        data = workflow_to_dict(workflow_get(workflow_id=workflow.id))
        self._print(
            options,
            {**data, "retried": [str(job_id) for job_id in retried]},
            f"workflow {data['workflowId']}: {len(retried)} failed job(s) retried\n" + _jobs(data),
        )


def _jobs(data: dict) -> str:
    return "\n".join(
        f"  {job['ref']:24} {job['status']:10} {job['jobId']}"
        + (f"  after {', '.join(job['dependsOn'])}" if job["dependsOn"] else "")
        for job in data["jobs"]
    )


def _describe(data: dict) -> str:
    return "\n".join(
        [
            f"workflow {data['workflowId']} ({data['name']}): {data['status']}",
            f"  created   {data['createdAt']}",
            f"  finished  {data['finishedAt'] or '-'}",
            f"  jobs      {len(data['jobs'])}, {data['unfinishedJobs']} unfinished, "
            f"{data['failedJobs']} failed",
            _jobs(data),
        ]
    )
