"""`manage.py queues list|set`: the queues, their work and executors, and their settings
(ARCHITECTURE §15; apps/engine/claim/queues.py says how the dispatcher applies them).

  queues list [--json]
  queues set NAME [--max-running N|none] [--weight W] [--json]    the options given change

Exit codes: 0 done; 2 bad input (nothing changed). Pause a queue with `manage.py pause --queue`.
"""

from __future__ import annotations

import json

from jobweaver.core.commands import JobWeaverCommand
from jobweaver.core.errors import InvalidRequest
from jobweaver.scheduler.selectors import queue_get, queue_list
from jobweaver.scheduler.services import UNCHANGED, queue_settings_set

COLUMNS = ("name", "waiting", "running", "executors", "maxRunning", "weight", "paused")


def _max_running(text: str) -> int | None:
    """N, or `none` for no cap (the range is the service's to check)."""
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise InvalidRequest(f"--max-running must be an integer or none, got {text!r}") from None


class Command(JobWeaverCommand):
    help = (
        "List the queues, or change a queue's cap (--max-running) or weight. Exit status: "
        "0 done, 2 bad input (nothing changed)."
    )

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="subcommand", metavar="{list,set}")
        commands.required = True
        listing = commands.add_parser(
            "list", help="every queue with work, a live executor or settings"
        )
        listing.add_argument("--json", action="store_true", help="machine-readable output")
        setting = commands.add_parser("set", help="change the settings given of a queue")
        setting.add_argument("name", help="the queue's name")
        setting.add_argument(
            "--max-running",
            metavar="N|none",
            help="at most N of its jobs dispatched or running across all executors (1-10000); "
            "none: no cap",
        )
        setting.add_argument(
            "--weight",
            type=int,
            metavar="W",
            help="its share (1-100) of executors that serve it and other queues with work",
        )
        setting.add_argument("--json", action="store_true", help="machine-readable output")
        for sub in (listing, setting):
            sub.error = self._usage_error  # one line and exit 2, as for the main parser

    def handle(self, *args, **options):
        {"list": self._list, "set": self._set}[options["subcommand"]](options)

    def _list(self, options) -> None:
        queues = queue_list()
        if options["json"]:
            self.stdout.write(json.dumps(queues, indent=2))
        elif not queues:
            self.stdout.write("no queues")
        else:
            self._table(queues)

    def _set(self, options) -> None:
        text = options["max_running"]
        queue_settings_set(
            name=options["name"],
            max_running=UNCHANGED if text is None else _max_running(text),
            weight=UNCHANGED if options["weight"] is None else options["weight"],
        )
        queue = queue_get(options["name"])
        if options["json"]:
            self.stdout.write(json.dumps(queue))
        else:
            self._table([queue])

    def _table(self, queues: list[dict]) -> None:
        def cell(value) -> str:
            return (
                "-"
                if value is None
                else str(value).lower()
                if isinstance(value, bool)
                else str(value)
            )

        rows = [COLUMNS, *[[cell(queue[column]) for column in COLUMNS] for queue in queues]]
        widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
        for row in rows:
            self.stdout.write(
                "  ".join(
                    text.ljust(width) for text, width in zip(row, widths, strict=True)
                ).rstrip()
            )
