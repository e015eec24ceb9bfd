"""The jobs app's `run_command` fixture: management commands run as a shell would."""

from apps.jobs.tests.conftest import run_command  # noqa: F401
