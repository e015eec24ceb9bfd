"""`make run`'s .env (infra/dev-env.sh): DEBUG on and a random metrics token, made once and then
kept, since /metrics always needs a token (§17)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "infra" / "dev-env.sh"


def run_in(directory: Path) -> dict[str, str]:
    subprocess.run([str(SCRIPT)], cwd=directory, check=True, timeout=30)
    lines = (directory / ".env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


def test_a_new_env_gets_debug_and_a_random_metrics_token_once(tmp_path):
    first = run_in(tmp_path)

    assert first["DJANGO_DEBUG"] == "1"
    assert re.fullmatch(r"[0-9a-f]{64}", first["JOBWEAVER_METRICS_TOKEN"])
    assert run_in(tmp_path) == first  # kept, not made anew
    other = tmp_path / "other"
    other.mkdir()
    assert run_in(other)["JOBWEAVER_METRICS_TOKEN"] != first["JOBWEAVER_METRICS_TOKEN"]


def test_an_existing_env_keeps_its_lines_and_gains_the_token(tmp_path):
    (tmp_path / ".env").write_text("DJANGO_DEBUG=1\nJOBWEAVER_LOG_LEVEL=DEBUG")  # no newline

    env = run_in(tmp_path)

    assert env["JOBWEAVER_LOG_LEVEL"] == "DEBUG"
    assert len(env["JOBWEAVER_METRICS_TOKEN"]) == 64
