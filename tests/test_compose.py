"""compose.yaml is a valid Compose file with the services of ARCHITECTURE §11.

No Docker engine runs on CI machines; `config` validates and interpolates without one. The
Compose v2 plugin (`docker compose`) is used when present, else Debian's `docker-compose` (1.29),
installed by: apt-get install -y --no-install-recommends docker-compose
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "compose.yaml"
INSTALL_HINT = "apt-get install -y --no-install-recommends docker-compose"
EXPECTED_SERVICES = {"postgres", "kafka", "migrate", "web", "scheduler", "executor", "beat"}
REQUIRED_SECRETS = {"DJANGO_SECRET_KEY": "compose-test-secret", "POSTGRES_PASSWORD": "compose-test"}


def _compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    if docker:
        probe = subprocess.run(
            [docker, "compose", "version"], capture_output=True, text=True, timeout=60
        )
        if probe.returncode == 0:
            return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


@pytest.fixture(scope="module")
def compose(tmp_path_factory) -> list[str]:
    command = _compose_command()
    if command is None:
        pytest.skip(f"neither `docker compose` nor `docker-compose` is installed ({INSTALL_HINT})")
    # An empty env file: a developer's .env next to compose.yaml must not fill in values.
    env_file = tmp_path_factory.mktemp("compose") / "empty.env"
    env_file.write_text("")
    return [*command, "--env-file", str(env_file), "-f", str(COMPOSE_FILE)]


def run_config(compose: list[str], *args: str, **secrets: str) -> subprocess.CompletedProcess:
    # Only what a deployer would set: the test session's own DJANGO_SECRET_KEY must not leak in.
    env = {k: v for k, v in os.environ.items() if k not in REQUIRED_SECRETS}
    env.update(secrets)
    return subprocess.run(
        [*compose, "config", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_compose_file_is_valid(compose):
    result = run_config(compose, "-q", **REQUIRED_SECRETS)

    assert result.returncode == 0, result.stderr
    # An unset variable without a default would silently become an empty string.
    assert "is not set" not in result.stderr, result.stderr


def test_compose_file_defines_the_production_services(compose):
    result = run_config(compose, "--services", **REQUIRED_SECRETS)

    assert result.returncode == 0, result.stderr
    assert set(result.stdout.split()) == EXPECTED_SERVICES


@pytest.mark.parametrize("missing", sorted(REQUIRED_SECRETS))
def test_compose_refuses_to_start_without_its_secrets(compose, missing):
    secrets = {name: value for name, value in REQUIRED_SECRETS.items() if name != missing}

    result = run_config(compose, "-q", **secrets)

    assert result.returncode != 0
    assert f"set {missing}" in result.stderr, result.stderr
