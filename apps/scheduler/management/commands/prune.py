"""`manage.py prune [--dry-run]`: apply the retention settings now (apps/scheduler/retention.py).

Prints one line per kind: how many rows would go (`--dry-run`) or went. Exit status 0.
"""

from __future__ import annotations

from jobweaver.core.commands import JobWeaverCommand
from jobweaver.scheduler.retention import retention_preview, retention_prune


class Command(JobWeaverCommand):
    help = (
        "Delete finished jobs (with their execution, attempts and events) and published outbox "
        "rows older than the JOBWEAVER_RETAIN_* settings, in short batches. --dry-run only "
        "counts what would go."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="print what would be deleted; delete nothing"
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=None,
            metavar="N",
            help="rows per transaction (default JOBWEAVER_PRUNE_BATCH_SIZE)",
        )

    def handle(self, *args, **options):
        if options["batch_size"] is not None and options["batch_size"] < 1:
            self._usage_error("--batch-size must be at least 1")
        if options["dry_run"]:
            counts, verb = retention_preview(), "would be pruned"
        else:
            counts, verb = retention_prune(batch_size=options["batch_size"]), "pruned"
        for kind, count in counts.items():
            self.stdout.write(f"{kind}: {count} {verb}")
