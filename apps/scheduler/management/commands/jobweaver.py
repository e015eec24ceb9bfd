"""`manage.py jobweaver worker executor|scheduler|beat`: JobWeaver's worker processes in any
Django project (ARCHITECTURE §14); the reference site's `python -m jobweaver_site.workers` is the
same command."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from jobweaver.workers import POOLS, ROLES, WorkerOptionError, WorkerOptions, run


class Command(BaseCommand):
    help = "Run a JobWeaver worker: executor, scheduler or beat."

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="command", required=True)
        worker = commands.add_parser("worker", help="start a worker process of one role")
        worker.add_argument("role", choices=ROLES)
        worker.add_argument(
            "-n", "--hostname", help="the worker's name (Celery's %%h is the host), e.g. e1@%%h"
        )
        worker.add_argument(
            "--concurrency", type=int, help="executor threads (JOBWEAVER_EXECUTOR_CONCURRENCY)"
        )
        worker.add_argument(
            "--pool",
            help=f"executors: {' or '.join(POOLS)} (JOBWEAVER_EXECUTOR_POOL, default threads)",
        )
        worker.add_argument(
            "--max-tasks-per-child",
            type=int,
            metavar="N",
            help="process pool: replace a child after this many attempts",
        )
        worker.add_argument(
            "--max-memory-per-child",
            type=int,
            metavar="MB",
            help="process pool: replace a child once its peak memory passed this many MB",
        )
        worker.add_argument(
            "--queues",
            help="comma-separated queues the executor serves (JOBWEAVER_EXECUTOR_QUEUES)",
        )
        worker.add_argument(
            "--dry-run", action="store_true", help="print the Celery command line and exit"
        )

    def handle(self, *args, **options):
        worker = WorkerOptions(
            role=options["role"],
            hostname=options["hostname"],
            concurrency=options["concurrency"],
            pool=options["pool"],
            max_tasks_per_child=options["max_tasks_per_child"],
            max_memory_per_child=options["max_memory_per_child"],
            queues=None
            if options["queues"] is None
            else tuple(q.strip() for q in options["queues"].split(",") if q.strip()),
        )
        try:
            line = run(worker, dry_run=options["dry_run"])
        except WorkerOptionError as error:
            raise CommandError(str(error), returncode=2) from None
        if line is not None:
            self.stdout.write(line)
