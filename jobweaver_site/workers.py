"""Start a JobWeaver process role in the reference site: `python -m jobweaver_site.workers
executor|scheduler|beat`, the same command as `manage.py jobweaver worker …` (jobweaver/workers.py
says how each role runs). Also the workers' liveness probe, which starts no Django:
`python -m jobweaver_site.workers probe ROLE`.
"""

from __future__ import annotations

import os
import sys

ROLES = ("executor", "scheduler", "beat")


USAGE = f"""usage: python -m jobweaver_site.workers {"|".join(ROLES)} [name]
       python -m jobweaver_site.workers {"|".join(ROLES)} --dry-run   (print the Celery command)
       python -m jobweaver_site.workers probe {"|".join(ROLES)}       (liveness: exit 0 or 1)"""


def main(argv: list[str]) -> None:
    if argv[:1] == ["probe"] and len(argv) == 2 and argv[1] in ROLES:
        from jobweaver.core.liveness import probe  # no Django: probes must stay cheap

        alive, reason = probe(argv[1])
        print(reason, file=sys.stdout if alive else sys.stderr)
        raise SystemExit(0 if alive else 1)
    wants_help = bool({"-h", "--help"} & set(argv[:2]))
    if wants_help or len(argv) < 1 or argv[0] not in ROLES:
        print(USAGE, file=sys.stdout if wants_help else sys.stderr)
        raise SystemExit(0 if wants_help else 2)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "jobweaver_site.settings")
    # Read while Django sets up (the log lines' service, the executor's logging settings).
    os.environ["JOBWEAVER_WORKER_ROLE"] = argv[0]
    import django

    django.setup()
    from jobweaver.workers import WorkerOptions, run

    dry_run = argv[1:2] == ["--dry-run"]
    name = argv[1] if len(argv) > 1 and not dry_run else None
    line = run(WorkerOptions(role=argv[0], hostname=name), dry_run=dry_run)
    if line is not None:
        # Settings, apps and the Celery app load; nothing connects or starts (compose's CI).
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
