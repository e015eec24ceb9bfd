# The jobs app's fixture that runs a management command as manage.py does.
from jobweaver.jobs.tests.conftest import run_command  # noqa: F401
