"""`manage.py pauses [--json]`: the paused queues and job types, with who paused each, since
when and why. Exit status 0."""

from __future__ import annotations

import json

from jobweaver.core.commands import JobWeaverCommand
from jobweaver.scheduler.management.commands._controls import pause_line
from jobweaver.scheduler.selectors import pause_list, pause_to_dict


class Command(JobWeaverCommand):
    help = "List the paused queues and job types (pause and resume change them)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    def handle(self, *args, **options):
        pauses = pause_list()
        if options["json"]:
            self.stdout.write(json.dumps([pause_to_dict(pause) for pause in pauses], indent=2))
        elif not pauses:
            self.stdout.write("nothing is paused")
        else:
            for pause in pauses:
                self.stdout.write(pause_line(pause))
