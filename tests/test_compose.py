"""compose.yaml is a valid Compose file with the services of ARCHITECTURE §11.

No Docker engine runs on CI machines; `config` validates and interpolates without one. The
Compose v2 plugin (`docker compose`) is used when present, else Debian's `docker-compose` (1.29),
installed by: apt-get install -y --no-install-recommends docker-compose
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.stack import skip_or_fail_without

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "compose.yaml"
INSTALL_HINT = "apt-get install -y --no-install-recommends docker-compose"
EXPECTED_SERVICES = {
    "postgres",
    "kafka",
    "migrate",
    "web",
    "scheduler",
    "executor",
    "executor-bulk",
    "beat",
}
# Executor pools (issue 31): each service serves its own queues and scales on its own.
EXECUTOR_POOLS = {"executor": ["default"], "executor-bulk": ["bulk"]}
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
        skip_or_fail_without(
            "docker-compose",
            f"neither `docker compose` nor `docker-compose` is installed ({INSTALL_HINT})",
        )
    # An empty env file: a developer's .env next to compose.yaml must not fill in values.
    env_file = tmp_path_factory.mktemp("compose") / "empty.env"
    env_file.write_text("")
    return [*command, "--env-file", str(env_file), "-f", str(COMPOSE_FILE)]


def run_config(compose: list[str], *args: str, **secrets: str) -> subprocess.CompletedProcess:
    # Only what a deployer would set: the test session's own DJANGO_SECRET_KEY (and metrics
    # token) must not leak in.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in REQUIRED_SECRETS and k != "JOBWEAVER_METRICS_TOKEN"
    }
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


def compose_services(compose: list[str]) -> dict:
    result = run_config(compose, **REQUIRED_SECRETS)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)["services"]


def test_every_service_has_a_health_check_and_one_beat(compose):
    services = compose_services(compose)
    # migrate is one-shot: its exit status is its health (the app services wait for it).
    long_running = set(services) - {"migrate"}
    assert {name for name in long_running if "healthcheck" not in services[name]} == set()
    assert services["postgres"]["image"].startswith("postgres:16")
    assert services["kafka"]["image"].startswith("apache/kafka:4.")
    assert services["beat"].get("deploy", {}).get("replicas", 1) == 1
    for pool in EXECUTOR_POOLS:
        assert services[pool]["deploy"]["replicas"] >= 1  # and `--scale <pool>=N`


def test_each_executor_pool_serves_its_own_queues(compose):
    services = compose_services(compose)
    pools = {
        name: service
        for name, service in services.items()
        if service.get("command", [])[:5]
        == ["python", "manage.py", "jobweaver", "worker", "executor"]
    }
    assert set(pools) == set(EXECUTOR_POOLS)
    for name, queues in EXECUTOR_POOLS.items():
        command = pools[name]["command"]
        # On the command line, not by JOBWEAVER_EXECUTOR_QUEUES: every service shares one
        # environment, which would move all pools at once.
        assert command[5:] == ["--queues", ",".join(queues)], command
        assert pools[name]["healthcheck"]["test"][-2:] == ["probe", "executor"]
        # Warm shutdown needs the same grace in every pool.
        assert pools[name]["stop_grace_period"] == services["executor"]["stop_grace_period"]


def _dry_run(command: list[str]) -> list[list[str]]:
    """The project commands inside a service's command, each made harmless: a role with
    --dry-run, a management command with --help, gunicorn with --check-config."""
    bin_dir = Path(sys.executable).parent
    if command[:2] == ["sh", "-c"]:
        return [step for part in command[2].split("&&") for step in _dry_run(part.split())]
    if command[:3] == ["python", "-m", "jobweaver_site.workers"]:
        return [[sys.executable, *command[1:], "--dry-run"]]
    if command[:4] == ["python", "manage.py", "jobweaver", "worker"]:
        return [[sys.executable, *command[1:], "--dry-run"]]
    if command[:2] == ["python", "manage.py"]:
        return [[sys.executable, "manage.py", command[2], "--help"]]
    if command[0] == "gunicorn":
        return [[str(bin_dir / "gunicorn"), "--check-config", *command[1:]]]
    raise AssertionError(f"unknown command shape, teach this test: {command}")


def test_every_service_command_exists_in_the_project(compose):
    services = compose_services(compose)
    commands = [
        step
        for name in ("migrate", "web", "scheduler", *EXECUTOR_POOLS, "beat")
        for step in _dry_run(services[name]["command"])
    ]
    assert len(commands) == 8
    for command in commands:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"


def test_worker_health_checks_are_the_projects_probe(compose):
    services = compose_services(compose)
    for role in ("scheduler", "executor", "beat"):
        test = services[role]["healthcheck"]["test"]
        assert test[:5] == ["CMD", "python", "-m", "jobweaver_site.workers", "probe"]
        env = {**os.environ, "JOBWEAVER_LIVENESS_FILE": str(ROOT / ".devdata" / "no-such.alive")}
        done = subprocess.run(
            [sys.executable, *test[2:]], cwd=ROOT, env=env, capture_output=True, text=True
        )
        # Not running here, so not alive: the probe exists and says why.
        assert done.returncode == 1 and f"{role}: no heartbeat file" in done.stderr


def _published(port) -> tuple[str, str]:
    """(host address, host port) of a published port, in either Compose's short or long form."""
    if isinstance(port, dict):  # Compose v2: {"host_ip": ..., "published": ..., "target": ...}
        return port.get("host_ip", ""), str(port["published"])
    parts = str(port).split("/")[0].split(":")  # docker-compose 1.29: "127.0.0.1:8000:8000/tcp"
    return (parts[0], parts[1]) if len(parts) == 3 else ("", parts[0])


def test_plain_http_is_published_on_this_host_only(compose):
    """The web speaks plain HTTP with cookies not marked secure: by default only this host
    reaches it (a TLS proxy in front is how others do, docs/operations/security.md)."""
    services = compose_services(compose)

    assert [_published(port) for port in services["web"]["ports"]] == [("127.0.0.1", "8000")]
    assert [name for name, service in services.items() if service.get("ports")] == ["web"]
    environment = services["web"]["environment"]
    assert environment["JOBWEAVER_SECURE_COOKIES"] == "0"  # fine on loopback, documented


def test_prometheus_scrapes_every_metrics_endpoint_with_the_token(compose):
    services = compose_services(compose)
    unset = run_config(compose, **REQUIRED_SECRETS)
    with_token = run_config(compose, **REQUIRED_SECRETS, JOBWEAVER_METRICS_TOKEN="scrape-me")
    assert unset.returncode == 0 and with_token.returncode == 0, unset.stderr + with_token.stderr
    tokened = yaml.safe_load(with_token.stdout)["services"]

    # Prometheus on the compose network names the web `web`: an allowed host.
    assert "web" in services["web"]["environment"]["DJANGO_ALLOWED_HOSTS"].split(",")
    for name in ("web", "scheduler", *EXECUTOR_POOLS, "beat"):
        assert services[name]["environment"]["JOBWEAVER_METRICS_TOKEN"] == ""  # 404: off
        assert tokened[name]["environment"]["JOBWEAVER_METRICS_TOKEN"] == "scrape-me"
    for name in ("scheduler", *EXECUTOR_POOLS, "beat"):
        environment = services[name]["environment"]
        # Reachable by Prometheus on the compose network (no port of theirs is published).
        assert environment["JOBWEAVER_METRICS_BIND"] == "0.0.0.0"
        assert environment["JOBWEAVER_METRICS_PORT"] == "9100"
