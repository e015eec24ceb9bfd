"""`manage.py limits list|set|delete`: concurrency and rate limits per concurrency key pattern
(apps/engine/claim/rules.py says how the dispatcher applies them).

  limits list [--json]
  limits set PATTERN [--max-running N] [--max-per-second R] [--global]    create or replace
  limits delete PATTERN

`*` in a pattern matches any run of characters (quote it in the shell); of the patterns that
match a key, the most specific (longest) applies. A limit is per owner (each owner's jobs of a
key count on their own) unless `--global` (every owner's jobs of a key count as one). Exit
codes: 0 done; 1 delete of a pattern with no limit (nothing changed); 2 bad input (nothing
changed).
"""

from __future__ import annotations

import json

from jobweaver.core.commands import EXIT_FAILED, CommandExit, JobWeaverCommand
from jobweaver.scheduler.management.commands._controls import limit_line
from jobweaver.scheduler.selectors import concurrency_limit_list, limit_to_dict
from jobweaver.scheduler.services import concurrency_limit_delete, concurrency_limit_set


class Command(JobWeaverCommand):
    help = (
        "List, set or delete concurrency and rate limits per key pattern. Exit status: 0 done, "
        "1 no such limit to delete, 2 bad input (nothing changed)."
    )

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="subcommand", metavar="{list,set,delete}")
        commands.required = True
        listing = commands.add_parser("list", help="every limit, by pattern")
        listing.add_argument("--json", action="store_true", help="machine-readable output")
        setting = commands.add_parser("set", help="create or replace the limit of a pattern")
        setting.add_argument("pattern", help="a key pattern; * matches any run of characters")
        setting.add_argument(
            "--max-running", type=int, metavar="N", help="at most N of a key's jobs at once"
        )
        setting.add_argument(
            "--max-per-second",
            type=int,
            metavar="R",
            help="at most R of a key's jobs sent in any one second",
        )
        setting.add_argument(
            "--global",
            dest="is_global",
            action="store_true",
            help="every owner's jobs of a key count as one key (default: each owner's alone)",
        )
        setting.add_argument("--json", action="store_true", help="machine-readable output")
        deleting = commands.add_parser("delete", help="remove the limit of a pattern")
        deleting.add_argument("pattern")
        for sub in (listing, setting, deleting):
            sub.error = self._usage_error  # one line and exit 2, as for the main parser

    def handle(self, *args, **options):
        {"list": self._list, "set": self._set, "delete": self._delete}[options["subcommand"]](
            options
        )

    def _list(self, options) -> None:
        limits = concurrency_limit_list()
        if options["json"]:
            self.stdout.write(json.dumps([limit_to_dict(limit) for limit in limits], indent=2))
        elif not limits:
            self.stdout.write("no limits")
        else:
            for limit in limits:
                self.stdout.write(limit_line(limit))

    def _set(self, options) -> None:
        limit, created = concurrency_limit_set(
            pattern=options["pattern"],
            max_running=options["max_running"],
            max_per_second=options["max_per_second"],
            is_global=options["is_global"],
        )
        if options["json"]:
            self.stdout.write(json.dumps({**limit_to_dict(limit), "created": created}))
        else:
            self.stdout.write(f"{'set' if created else 'replaced'} {limit_line(limit)}")

    def _delete(self, options) -> None:
        if not concurrency_limit_delete(pattern=options["pattern"]):
            raise CommandExit(
                f"no limit for pattern {options['pattern']!r}; nothing changed",
                returncode=EXIT_FAILED,
            )
        self.stdout.write(f"deleted the limit of {options['pattern']}")
