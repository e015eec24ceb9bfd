"""The Helm chart (deploy/helm/jobweaver) lints and renders with the default values and the
production example, and what it renders keeps the rules of issue 13: executors outlive their
shutdown grace, exactly one beat with Recreate, migrations as a pre-install/pre-upgrade hook,
probes everywhere, credentials only by Secret reference. Executors come in pools, one
Deployment each serving its queues, optionally scaled by a KEDA ScaledObject (issue 31).

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


POOL_LABEL = "jobweaver/executor-pool"


def of_pools(docs: list[dict], kind: str) -> dict[str, dict]:
    """The executor pools' objects of one kind, by pool name."""
    return {
        doc["metadata"]["labels"][POOL_LABEL]: doc
        for doc in docs
        if doc["kind"] == kind and POOL_LABEL in doc["metadata"]["labels"]
    }


def write_values(tmp_path: Path, values: dict) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


KEDA_ON = {"enabled": True, "serverAddress": "http://prometheus.monitoring:9090"}
# Every metrics endpoint needs the bearer token (§17): whatever scrapes them needs this key.
METRICS_TOKEN = {"secret": {"metricsTokenKey": "METRICS_TOKEN"}}


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

    executors = of_pools(docs, "Deployment")
    budgets = of_pools(docs, "PodDisruptionBudget")
    assert {"default", "bulk"} <= set(executors)
    assert set(budgets) == set(executors)
    for pool, deployment in executors.items():
        executor = deployment["spec"]["template"]["spec"]
        grace = float(env_of(executor["containers"][0])["JOBWEAVER_SHUTDOWN_GRACE_SECONDS"])
        assert executor["terminationGracePeriodSeconds"] > grace
        # Each pool's budget covers its own pods only: a rollout of one pool never eats the
        # other's allowance.
        assert budgets[pool]["spec"]["selector"] == deployment["spec"]["selector"]
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


def test_default_render_has_an_executor_pool_per_queue(helm):
    docs = render(helm)
    executors = of_pools(docs, "Deployment")

    assert set(executors) == {"default", "bulk"}
    for pool, replicas in (("default", 3), ("bulk", 1)):
        deployment = executors[pool]
        assert deployment["metadata"]["name"] == f"jw-jobweaver-executor-{pool}"
        assert deployment["spec"]["replicas"] == replicas
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["command"][-3:] == ["executor", "--queues", pool]
        # The selectors differ, so the pools' ReplicaSets never adopt each other's pods.
        assert deployment["spec"]["selector"]["matchLabels"][POOL_LABEL] == pool
    assert not [doc for doc in docs if doc["kind"] == "ScaledObject"]


def test_keda_renders_a_scaled_object_per_pool_for_its_deployment(helm, tmp_path):
    values = write_values(
        tmp_path,
        {
            "executor": {
                "pools": [
                    {"name": "default", "queues": ["default"], "replicas": 2},
                    {"name": "bulk", "queues": ["bulk", "reports"], "replicas": 1},
                ],
                "autoscaling": {"keda": {**KEDA_ON, "metricSelector": 'namespace="jobs"'}},
            },
            **METRICS_TOKEN,
        },
    )
    lint = run(helm, "lint", "--strict", str(CHART), "-f", values)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    docs = render(helm, values)
    executors = of_pools(docs, "Deployment")
    scaled = of_pools(docs, "ScaledObject")

    assert set(scaled) == set(executors) == {"default", "bulk"}
    for pool, matcher in (("default", 'queue=~"default"'), ("bulk", 'queue=~"bulk|reports"')):
        spec = scaled[pool]["spec"]
        assert scaled[pool]["apiVersion"] == "keda.sh/v1alpha1"
        assert spec["scaleTargetRef"]["name"] == executors[pool]["metadata"]["name"]
        assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (1, 6)
        # KEDA owns the count: a rendered one would reset it on every upgrade.
        assert "replicas" not in executors[pool]["spec"]
        queries = {trigger["name"]: trigger["metadata"] for trigger in spec["triggers"]}
        assert set(queries) == {"waiting-jobs", "oldest-due-age"}
        for trigger in spec["triggers"]:
            assert trigger["type"] == "prometheus"
            metadata = trigger["metadata"]
            assert metadata["serverAddress"] == KEDA_ON["serverAddress"]
            assert f'{{{matcher},namespace="jobs"}}' in metadata["query"]
            assert isinstance(metadata["threshold"], str)
        assert queries["waiting-jobs"]["threshold"] == "20"
        assert queries["oldest-due-age"]["threshold"] == "60"


def test_a_pool_may_run_its_attempts_in_child_processes(helm, tmp_path):
    values = write_values(
        tmp_path,
        {
            "executor": {
                "pools": [
                    {"name": "default", "queues": ["default"], "replicas": 2},
                    {
                        "name": "cpu",
                        "queues": ["cpu"],
                        "processPool": {"maxTasksPerChild": 1000, "maxMemoryPerChildMB": 400},
                    },
                    {"name": "plain", "queues": ["plain"], "processPool": {}},
                ],
            }
        },
    )
    lint = run(helm, "lint", "--strict", str(CHART), "-f", values)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    executors = of_pools(render(helm, values), "Deployment")

    commands = {
        pool: deployment["spec"]["template"]["spec"]["containers"][0]["command"]
        for pool, deployment in executors.items()
    }
    assert commands["default"][-3:] == ["executor", "--queues", "default"]
    assert commands["plain"][4:] == ["executor", "--queues", "plain", "--pool", "processes"]
    assert commands["cpu"][4:] == [
        *("executor", "--queues", "cpu", "--pool", "processes"),
        *("--max-tasks-per-child", "1000", "--max-memory-per-child", "400"),
    ]


def test_keda_is_enabled_pool_by_pool(helm, tmp_path):
    values = write_values(
        tmp_path,
        {
            "executor": {
                "pools": [
                    {"name": "default", "queues": ["default"], "replicas": 2},
                    {
                        "name": "bulk",
                        "queues": ["bulk"],
                        "autoscaling": {
                            "keda": {**KEDA_ON, "maxReplicaCount": 6, "oldestDueAgeSeconds": 0}
                        },
                    },
                ],
            },
            **METRICS_TOKEN,
        },
    )
    docs = render(helm, values)
    executors = of_pools(docs, "Deployment")
    scaled = of_pools(docs, "ScaledObject")

    assert set(scaled) == {"bulk"}
    assert scaled["bulk"]["spec"]["maxReplicaCount"] == 6
    # A threshold of 0 drops that trigger.
    assert [trigger["name"] for trigger in scaled["bulk"]["spec"]["triggers"]] == ["waiting-jobs"]
    assert executors["default"]["spec"]["replicas"] == 2


@pytest.mark.parametrize(
    ("pool", "where"),
    [
        ({"name": "bulk", "queues": ["bulk"], "replicas": -1}, "/executor/pools/0/replicas"),
        ({"name": "bulk", "queues": ["bulk"], "replica": 2}, "'replica' not allowed"),
        ({"name": "bulk", "queues": []}, "/executor/pools/0/queues"),
        ({"name": "bulk", "queues": ["Bulk.Reports"]}, "/executor/pools/0/queues/0"),
        ({"name": "Bulk_Pool", "queues": ["bulk"]}, "/executor/pools/0/name"),
        (
            {"name": "bulk", "queues": ["bulk"], "autoscaling": {"keda": {"minReplicas": 0}}},
            "'minReplicas' not allowed",
        ),
    ],
    ids=["negative-replicas", "unknown-key", "no-queue", "bad-queue", "bad-name", "bad-keda"],
)
def test_schema_rejects_a_bad_pool(helm, tmp_path, pool, where):
    values = write_values(tmp_path, {"executor": {"pools": [pool]}})

    done = run(helm, "template", "jw", str(CHART), "-f", values)

    assert done.returncode != 0 and "values don't meet the specifications" in done.stderr
    assert where in done.stderr, done.stderr


def test_replicas_moved_into_the_pools(helm):
    done = run(helm, "template", "jw", str(CHART), "--set", "executor.replicas=3")
    assert done.returncode != 0 and "'replicas' not allowed" in done.stderr


@pytest.mark.parametrize(
    ("executor", "message"),
    [
        (
            {"pools": [{"name": "a", "queues": ["a"]}, {"name": "a", "queues": ["b"]}]},
            'two pools are named "a"',
        ),
        ({"autoscaling": {"keda": {"enabled": True}}}, "set serverAddress"),
        (
            {"autoscaling": {"keda": {**KEDA_ON, "minReplicaCount": 5, "maxReplicaCount": 2}}},
            "minReplicaCount must not exceed maxReplicaCount",
        ),
        (
            {
                "autoscaling": {
                    "keda": {**KEDA_ON, "waitingJobsPerReplica": 0, "oldestDueAgeSeconds": 0}
                }
            },
            "nothing to scale on",
        ),
        (
            {"pools": [{"name": "default", "queues": ["default"], "replicas": 13}]},
            "kafka.runJobPartitions (12) must be at least the executors of all pools",
        ),
    ],
    ids=["duplicate-name", "no-server", "min-over-max", "no-trigger", "more-than-partitions"],
)
def test_chart_refuses_pools_that_cannot_work(helm, tmp_path, executor, message):
    values = write_values(tmp_path, {"executor": executor, **METRICS_TOKEN})

    done = run(helm, "template", "jw", str(CHART), "-f", values)

    assert done.returncode != 0 and message in done.stderr, done.stderr


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


def test_keda_queries_use_only_exported_metrics(helm, tmp_path):
    values = write_values(
        tmp_path, {"executor": {"autoscaling": {"keda": KEDA_ON}}, **METRICS_TOKEN}
    )
    scaled = [doc for doc in render(helm, values) if doc["kind"] == "ScaledObject"]
    queries = [
        trigger["metadata"]["query"] for doc in scaled for trigger in doc["spec"]["triggers"]
    ]

    assert queries
    exported = exported_metric_names()
    for query in queries:
        used = set(re.findall(r"\bjobweaver_[a-z_]+", query))
        assert used and used <= exported, f"{query}: unknown {used - exported}"


def containers_of(docs: list[dict]) -> dict[str, dict]:
    """Every Deployment's container, by Deployment name."""
    return {
        doc["metadata"]["name"]: doc["spec"]["template"]["spec"]["containers"][0]
        for doc in docs
        if doc["kind"] == "Deployment"
    }


def test_metrics_endpoints_are_reachable_by_pod_ip_and_need_the_token(helm, tmp_path):
    """Prometheus scrapes a pod by its IP (its Host header) with the bearer token: the web
    allows its pod IP as a host, the workers bind the pod's address, every container gets the
    token from the Secret."""
    plain = containers_of(render(helm))
    tokened = containers_of(render(helm, write_values(tmp_path, METRICS_TOKEN)))

    for name, container in plain.items():
        names = [entry["name"] for entry in container["env"]]
        env = env_of(container)
        # Kubernetes expands $(JOBWEAVER_POD_IP) only from a variable defined before.
        assert names.index("JOBWEAVER_POD_IP") < names.index("DJANGO_ALLOWED_HOSTS")
        assert env["JOBWEAVER_POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
        assert env["DJANGO_ALLOWED_HOSTS"] == "jobweaver.example.com,$(JOBWEAVER_POD_IP)"
        assert "JOBWEAVER_METRICS_TOKEN" not in env  # no key: every endpoint answers 404
        assert env_of(tokened[name])["JOBWEAVER_METRICS_TOKEN"] == {
            "secretKeyRef": {"name": "jobweaver", "key": "METRICS_TOKEN"}
        }
        if name.endswith("-web"):
            assert "JOBWEAVER_METRICS_PORT" not in env
        else:
            assert env["JOBWEAVER_METRICS_PORT"] == "9100"
            assert env["JOBWEAVER_METRICS_BIND"] == "0.0.0.0"


def test_pod_monitor_scrapes_the_web_and_the_workers_with_the_token(helm, tmp_path):
    values = write_values(tmp_path, {**METRICS_TOKEN, "metrics": {"podMonitor": {"enabled": True}}})
    lint = run(helm, "lint", "--strict", str(CHART), "-f", values)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    docs = render(helm, values)
    (monitor,) = [doc for doc in docs if doc["kind"] == "PodMonitor"]

    endpoints = {endpoint["port"]: endpoint for endpoint in monitor["spec"]["podMetricsEndpoints"]}
    assert set(endpoints) == {"http", "metrics"}
    for endpoint in endpoints.values():
        assert endpoint["path"] == "/metrics"
        assert endpoint["authorization"] == {
            "type": "Bearer",
            "credentials": {"name": "jobweaver", "key": "METRICS_TOKEN"},
        }
    ports = {
        port["name"]
        for container in containers_of(docs).values()
        for port in container.get("ports", [])
    }
    assert {"http", "metrics"} <= ports
    assert monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] == "jw"
    assert not [doc for doc in render(helm) if doc["kind"] == "PodMonitor"]  # off by default


@pytest.mark.parametrize(
    "values",
    [
        {"metrics": {"podMonitor": {"enabled": True}}},
        {"executor": {"autoscaling": {"keda": KEDA_ON}}},
    ],
    ids=["pod-monitor", "keda"],
)
def test_scrapers_need_the_metrics_token(helm, tmp_path, values):
    done = run(helm, "template", "jw", str(CHART), "-f", write_values(tmp_path, values))

    assert done.returncode != 0 and "needs secret.metricsTokenKey" in done.stderr, done.stderr
