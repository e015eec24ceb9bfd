"""`manage.py resume --queue NAME | --job-type TYPE`: its waiting work is dispatched again
(apps/scheduler/services.py `queue_resume`).

Exit codes: 0 resumed; 1 it was not paused (nothing changed); 2 bad input (an invalid queue
name, an unknown job type).
"""

from __future__ import annotations

from jobweaver.core.commands import EXIT_FAILED, CommandExit, JobWeaverCommand
from jobweaver.scheduler.management.commands._controls import (
    add_target_arguments,
    described,
    target,
)
from jobweaver.scheduler.services import queue_resume


class Command(JobWeaverCommand):
    help = (
        "Resume a paused queue or job type. Exit status: 0 resumed, 1 it was not paused, "
        "2 bad input."
    )

    def add_arguments(self, parser):
        add_target_arguments(parser)

    def handle(self, *args, **options):
        scope, name = target(options)
        if not queue_resume(scope=scope, name=name):
            raise CommandExit(
                f"{described(scope, name)} is not paused; nothing changed", returncode=EXIT_FAILED
            )
        self.stdout.write(f"resumed {described(scope, name)}")
