"""What the pause, resume, pauses and limits commands share: the `--queue NAME | --job-type
TYPE` target, who is acting, and the lines they print."""

from __future__ import annotations

import getpass

from jobweaver.core.timeutil import iso
from jobweaver.scheduler.models import ConcurrencyLimit, Pause, PauseScope

SCOPE_WORDS = {PauseScope.QUEUE: "queue", PauseScope.JOB_TYPE: "job type"}


def add_target_arguments(parser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--queue", metavar="NAME", help="a queue (a job's queueName)")
    target.add_argument("--job-type", metavar="TYPE", help="a job type: SIMULATION or TASK")


def target(options) -> tuple[str, str]:
    """(scope, name) from --queue or --job-type; the services check the name."""
    if options["queue"] is not None:
        return PauseScope.QUEUE, options["queue"]
    return PauseScope.JOB_TYPE, options["job_type"]


def described(scope: str, name: str) -> str:
    return f"{SCOPE_WORDS.get(scope, scope)} {name}"


def operator_name() -> str:
    """Who paused, as the pause records it: the shell's user."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no user name in the environment or the password database
        return "cli"


def pause_line(pause: Pause) -> str:
    by = f" by {pause.paused_by}" if pause.paused_by else ""
    reason = f": {pause.reason}" if pause.reason else ""
    since = iso(pause.paused_at)
    return f"{described(pause.scope, pause.name)} paused{by} since {since}{reason}"


def limit_line(limit: ConcurrencyLimit) -> str:
    running = limit.max_running if limit.max_running is not None else "-"
    per_second = limit.max_per_second if limit.max_per_second is not None else "-"
    scope = "global" if limit.is_global else "per owner"
    return f"{limit.pattern}: max running {running}, max per second {per_second}, {scope}"
