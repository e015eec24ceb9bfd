"""`manage.py pause --queue NAME | --job-type TYPE [--reason R]`: nothing of it starts from now
on. Deliveries sent but not started are taken back; running work finishes; waiting work stays
PENDING (apps/scheduler/services.py `queue_pause`).

Exit codes: 0 paused (or already paused: nothing changed, the pause as it was is printed);
2 bad input (an invalid queue name, an unknown job type, a reason over 200 characters).
"""

from __future__ import annotations

import json

from jobweaver.core.commands import JobWeaverCommand
from jobweaver.scheduler.management.commands._controls import (
    add_target_arguments,
    operator_name,
    pause_line,
    target,
)
from jobweaver.scheduler.selectors import pause_to_dict
from jobweaver.scheduler.services import queue_pause_ensure


class Command(JobWeaverCommand):
    help = (
        "Pause a queue or a job type: nothing of it starts; deliveries not yet started are "
        "taken back; running work finishes. Exit status: 0 paused, 2 bad input."
    )

    def add_arguments(self, parser):
        add_target_arguments(parser)
        parser.add_argument("--reason", default="", help="why (at most 200 characters)")
        parser.add_argument("--by", default=None, help="who pauses (default: cli:<your user>)")
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    def handle(self, *args, **options):
        scope, name = target(options)
        pause, created = queue_pause_ensure(
            scope=scope,
            name=name,
            reason=options["reason"],
            paused_by=options["by"] or operator_name(),
        )
        if options["json"]:
            self.stdout.write(json.dumps({**pause_to_dict(pause), "created": created}))
        elif created:
            self.stdout.write(pause_line(pause))
        else:
            self.stdout.write(f"already {pause_line(pause)}; nothing changed")
