"""The jobs app's `run_command` fixture: management commands run as a shell would."""

from jobweaver.jobs.tests.conftest import run_command  # noqa: F401
