"""A misconfigured site says so in one line and exits 2: no traceback (ARCHITECTURE §14)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_secret_key_is_one_line_and_exit_2():
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "manage.py: configuration error: DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off "
        "(the dev stack's are in .env: set -a && . ./.env && set +a)"
    ]
    assert "Traceback" not in done.stderr
