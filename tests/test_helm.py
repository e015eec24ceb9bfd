"""The Helm chart (deploy/helm/jobweaver) lints and renders with the default values and the
production example, and what it renders keeps the rules of issue 13: executors outlive their
shutdown grace, exactly one beat with Recreate, migrations as a pre-install/pre-upgrade hook,
probes everywhere, credentials only by Secret reference.

helm is built once into .cache/bin by `infra/stack.sh test-tools` (make test does it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.stack import skip_or_fail_without

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "deploy" / "helm" / "jobweaver"
PRODUCTION = CHART / "examples" / "production-values.yaml"
INSTALL_HINT = "infra/stack.sh test-tools (go install helm.sh/helm/v3/cmd/helm into .cache/bin)"


@pytest.fixture(scope="module")
def helm() -> str:
    local = ROOT / ".cache" / "bin" / "helm"
    found = str(local) if local.exists() else shutil.which("helm")
    if found is None:
        skip_or_fail_without("helm", f"helm is not installed ({INSTALL_HINT})")
    return found


def run(helm: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([helm, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def render(helm: str, *values: str) -> list[dict]:
    args = [arg for path in values for arg in ("-f", path)]
    done = run(helm, "template", "jw", str(CHART), *args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def by_kind_and_component(docs: list[dict]) -> dict[tuple[str, str], dict]:
    return {
        (doc["kind"], doc["metadata"]["labels"].get("app.kubernetes.io/component", "")): doc
        for doc in docs
    }


def env_of(container: dict) -> dict:
    return {entry["name"]: entry.get("value", entry.get("valueFrom")) for entry in container["env"]}


@pytest.mark.parametrize("values", [[], [str(PRODUCTION)]], ids=["default", "production"])
def test_chart_lints_and_renders_by_the_rules(helm, values):
    lint = run(helm, "lint", "--strict", str(CHART), *[a for v in values for a in ("-f", v)])
    assert lint.returncode == 0, lint.stdout + lint.stderr
    docs = render(helm, *values)
    objects = by_kind_and_component(docs)
    for component in ("web", "scheduler", "executor", "beat"):
        assert ("Deployment", component) in objects
    deployments = [doc for doc in docs if doc["kind"] == "Deployment"]
    for deployment in deployments:
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            assert "livenessProbe" in container and "readinessProbe" in container
            env = env_of(container)
            # Credentials come from the Secret, never as literal values.
            assert set(env["DJANGO_SECRET_KEY"]) == {"secretKeyRef"}
            assert set(env["DATABASE_URL"]) == {"secretKeyRef"}

    executor = objects[("Deployment", "executor")]["spec"]["template"]["spec"]
    grace = float(env_of(executor["containers"][0])["JOBWEAVER_SHUTDOWN_GRACE_SECONDS"])
    assert executor["terminationGracePeriodSeconds"] > grace
    assert any(
        doc["kind"] == "PodDisruptionBudget"
        and doc["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "executor"
        for doc in docs
    )
    beat = objects[("Deployment", "beat")]["spec"]
    assert beat["replicas"] == 1 and beat["strategy"] == {"type": "Recreate"}
    job = objects[("Job", "migrate")]
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert "manage.py migrate" in job["spec"]["template"]["spec"]["containers"][0]["args"][0]


def test_chart_refuses_a_grace_period_shorter_than_the_shutdown_grace(helm):
    done = run(
        helm, "template", "jw", str(CHART), "--set", "executor.terminationGracePeriodSeconds=30"
    )
    assert done.returncode != 0 and "must exceed config.shutdownGraceSeconds" in done.stderr


def test_schema_rejects_a_second_beat(helm):
    done = run(helm, "template", "jw", str(CHART), "--set", "beat.replicas=2")
    assert done.returncode != 0 and "replicas" in done.stderr


def exported_metric_names() -> set[str]:
    """Every series name the application exports (counters, histograms, cluster gauges)."""
    from jobweaver.core import metrics

    names = set()
    for value in vars(metrics).values():
        if hasattr(value, "describe") and hasattr(value, "_name"):
            for family in value.describe():
                names.update(
                    family.name + suffix for suffix in ("", "_total", "_bucket", "_count", "_sum")
                )
    source = (ROOT / "apps" / "scheduler" / "metrics.py").read_text()
    names.update(re.findall(r'"(jobweaver_[a-z_]+)"', source))
    return names


def test_alerts_and_dashboard_use_only_exported_metrics():
    exported = exported_metric_names()
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "jobweaver-alerts.yaml").read_text())
    alerts = {rule["alert"]: rule["expr"] for group in rules["groups"] for rule in group["rules"]}
    assert {
        "JobWeaverDeadLettersRising",
        "JobWeaverNoLiveExecutor",
        "JobWeaverOldestDueJobTooOld",
        "JobWeaverConsumerLagGrowing",
    } <= set(alerts)
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "jobweaver-dashboard.json").read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    for expr in [*alerts.values(), *queries]:
        used = set(re.findall(r"\bjobweaver_[a-z_]+", expr))
        assert used and used <= exported, f"{expr}: unknown {used - exported}"
