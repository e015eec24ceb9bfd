"""Production settings: `manage.py check --deploy` is clean, DEBUG is off unless the environment
says otherwise, and no .env file is read by the settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def production_environment(**extra: str) -> dict[str, str]:
    """This process's environment without the test settings' knobs, as a deployment has it."""
    environment = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DJANGO_", "JOBWEAVER_"))
    }
    environment.update(
        DJANGO_SETTINGS_MODULE="jobweaver_site.settings",
        DJANGO_SECRET_KEY="a9Qm3-production-like-secret-0f7c1b2e8d4a6c5b3e9f1a7d2c8b4e6f0a1b",
        DJANGO_ALLOWED_HOSTS="jobs.example.com",
        **extra,
    )
    return environment


def manage(*args: str, cwd: Path = ROOT, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=cwd,
        env=production_environment(**extra),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_production_settings():
    result = manage("check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


PRINT_SECURITY = (
    "from django.conf import settings as s; "
    "print(s.DEBUG, s.SECURE_SSL_REDIRECT, s.SESSION_COOKIE_SECURE, s.SECURE_HSTS_SECONDS > 0)"
)


def test_debug_is_off_and_https_on_unless_the_environment_says_otherwise(tmp_path):
    # A stray .env in the working directory must change nothing.
    (tmp_path / ".env").write_text("DJANGO_DEBUG=1\n")
    result = manage("shell", "-c", PRINT_SECURITY, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].split() == ["False", "True", "True", "True"]

    dev = manage("shell", "-c", PRINT_SECURITY, DJANGO_DEBUG="1")
    assert dev.stdout.splitlines()[-1].split() == ["True", "False", "False", "False"]


def test_the_settings_read_no_env_file():
    settings_source = (ROOT / "jobweaver_site" / "settings.py").read_text()
    assert "read_env" not in settings_source
