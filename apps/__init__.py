"""JobWeaver: durable jobs for Django (ARCHITECTURE §14).

A host project adds, in its settings:

    import jobweaver
    INSTALLED_APPS = [..., *jobweaver.INSTALLED_APPS]  # or jobweaver.installed_apps(INSTALLED_APPS)
    TASKS = {"default": {"BACKEND": "jobweaver.tasks.JobWeaverBackend"}}
    JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS = "kafka-1:9092,kafka-2:9092"

and `path("jobweaver/", include("jobweaver.urls"))` to its URLconf. Importing this package
imports no model and touches no database, so a settings module may import it.
"""

from __future__ import annotations

__version__ = "0.1.0"

# JobWeaver's apps and the third-party apps they need, in the order they must load: DRF and its
# schema (served from the sidecar's own files, never a CDN), django-celery-beat's schedule, the
# Tasks API backport on Django 5.2 (Django 6 has it built in).
_APPS = (
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "django_tasks",  # left out on Django 6
    "jobweaver.accounts",
    "jobweaver.jobs",
    "jobweaver.scheduler",
    "jobweaver.executor",
    "jobweaver.outbox",
    "jobweaver.schedules",
    "jobweaver.workflows",
    "jobweaver.tasks",
    "jobweaver.dashboard",
)


def _installed_apps() -> list[str]:
    import django  # only when asked: `import jobweaver.<module>` loads no Django

    return [app for app in _APPS if app != "django_tasks" or django.VERSION < (6, 0)]


def installed_apps(existing: list[str] | tuple[str, ...]) -> list[str]:
    """`existing` followed by what JobWeaver needs and `existing` lacks, in JobWeaver's order."""
    return [*existing, *(app for app in _installed_apps() if app not in existing)]


def __getattr__(name: str):
    # A module __getattr__ (PEP 562): `jobweaver.INSTALLED_APPS` is computed on first use.
    if name == "INSTALLED_APPS":
        return _installed_apps()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
