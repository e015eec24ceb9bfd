"""A Django team adopts JobWeaver (ARCHITECTURE §14): the wheels are built, a project made by
`django-admin startproject` installs them into a fresh venv, and its own task runs.

The host is what a real one looks like: its own package named `apps`, an app labelled `jobs`,
and its own Celery app set as the default (an in-memory broker). JobWeaver must still run the
host's `@task` function, enqueued in the host's transaction (a rolled-back enqueue never runs),
write the host's model, and show the job through the host's mounted API with a token. The
wheels' dependencies come from a local wheelhouse (.cache/wheels), filled once from the dev
lock, so this costs seconds, not a download.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.request
import uuid
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from tests.stack import ROOT, free_port, wait_for

pytestmark = pytest.mark.integration

WHEELHOUSE = ROOT / ".cache" / "wheels"
# The host project's own files (its package is named `apps`, as many projects' is).
HOST = Path(__file__).parent / "adoption_host"
RUNTIME_LOCK = ROOT / ".cache" / "wheels" / "lock.txt"


def run(*argv, cwd=None, env=None, timeout=600) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def build_wheels(dist: Path) -> list[Path]:
    """Both wheels, built from a copy of the checkout's files (tracked, or new and not
    ignored): setuptools builds in the source tree and reuses its build/ directory, so a
    module deleted since an earlier build would ride along in the wheel."""
    source = dist.parent / "source"
    listed = run("git", "ls-files", "--cached", "--others", "--exclude-standard", cwd=ROOT)
    for name in listed.splitlines():
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "-w",
        dist,
        source,
        source / "kombu_kafka",
        cwd=source,
    )
    return sorted(dist.glob("*.whl"))


def fill_wheelhouse(wheels: list[Path]) -> None:
    """The wheels of the dependencies, at the dev lock's versions, once: kept while the lock
    (requirements.txt) and the declared dependencies (pyproject.toml) are unchanged."""
    lock = (ROOT / "requirements.txt").read_text()
    stamp = lock + (ROOT / "pyproject.toml").read_text()
    if RUNTIME_LOCK.exists() and RUNTIME_LOCK.read_text() == stamp:
        return
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    _drop_own_wheels()  # pip would take a same-named wheel found here over the fresh build
    constraints = WHEELHOUSE / "constraints.txt"
    constraints.write_text(
        "".join(
            line.split("[")[0] + line[line.index("]") + 1 :] if "[" in line else line
            for line in lock.splitlines(keepends=True)
            if line.strip() and not line.startswith("#")
        )
    )
    run(
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "-d",
        WHEELHOUSE,
        "-c",
        constraints,
        "--find-links",
        wheels[0].parent,
        *[str(w) for w in wheels],
    )
    _drop_own_wheels()  # the wheelhouse holds the dependencies; ours come from each build
    RUNTIME_LOCK.write_text(stamp)


def _drop_own_wheels() -> None:
    for wheel in [*WHEELHOUSE.glob("django_jobweaver-*"), *WHEELHOUSE.glob("kombu_kafka-*")]:
        wheel.unlink()


HOST_MODELS = (HOST / "models.py-tpl").read_text()

HOST_TASKS = (HOST / "tasks.py-tpl").read_text()

HOST_CELERY = (HOST / "celery.py-tpl").read_text()

SHOW_RECEIPTS = (HOST / "show_receipts.py-tpl").read_text()

ENQUEUE = (HOST / "enqueue.py-tpl").read_text()


@pytest.fixture
def host_database():
    db = settings.DATABASES["default"]
    name = f"adopt_{uuid.uuid4().hex[:8]}"
    admin = f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}/postgres"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    yield name
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_fresh_project_installs_the_wheels_and_runs_its_own_task(tmp_path, host_database):
    wheels = build_wheels(tmp_path / "dist")
    assert {w.name.split("-")[0] for w in wheels} == {"django_jobweaver", "kombu_kafka"}
    packaged = run(sys.executable, "-m", "zipfile", "-l", wheels[0])
    assert "jobweaver/engine/mover.py" in packaged
    for absent in ("/tests/", "jobweaver_site", "apps/", "bench/"):
        assert absent not in packaged, f"{absent} in the wheel"
    fill_wheelhouse(wheels)
    venv = tmp_path / "venv"
    started = time.monotonic()  # from `pip install` to the first task done (printed with -s)
    run(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    run(
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-index",
        "--find-links",
        WHEELHOUSE,
        "--find-links",
        tmp_path / "dist",
        "django-jobweaver",
    )

    # The host's own environment: nothing of this test session's settings leaks into it.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "JOBWEAVER_"))}
    env.pop("PYTHONPATH", None)
    site = tmp_path / "host"
    site.mkdir()
    run(venv / "bin" / "django-admin", "startproject", "config", site, env=env)
    apps_package = site / "apps"
    (apps_package / "jobs").mkdir(parents=True)
    (apps_package / "__init__.py").write_text("")
    (apps_package / "jobs" / "__init__.py").write_text("")
    (apps_package / "jobs" / "apps.py").write_text(
        textwrap.dedent("""
        from django.apps import AppConfig


        class JobsConfig(AppConfig):
            name = "apps.jobs"
            label = "jobs"
            default_auto_field = "django.db.models.BigAutoField"
    """)
    )
    (apps_package / "jobs" / "models.py").write_text(HOST_MODELS)
    (apps_package / "jobs" / "tasks.py").write_text(HOST_TASKS)
    (site / "config" / "celery.py").write_text(HOST_CELERY)
    (site / "config" / "__init__.py").write_text("from .celery import app as celery_app\n")
    db = settings.DATABASES["default"]
    prefix = f"adopt-{uuid.uuid4().hex[:8]}-"
    with (site / "config" / "settings.py").open("a") as host_settings:
        host_settings.write(
            textwrap.dedent(f'''
            import jobweaver

            INSTALLED_APPS = ["apps.jobs", *jobweaver.installed_apps(INSTALLED_APPS)]
            TASKS = {{"default": {{"BACKEND": "jobweaver.tasks.JobWeaverBackend"}}}}
            JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS = "{settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS}"
            DATABASES = {{"default": {{
                "ENGINE": "django.db.backends.postgresql", "NAME": "{host_database}",
                "USER": "{db["USER"]}", "HOST": "{db["HOST"]}", "PORT": "{db["PORT"]}",
            }}}}
            # Short waits so the test does not sit through production's.
            JOBWEAVER_KAFKA_TOPIC_PREFIX = "{prefix}"
            JOBWEAVER_RUN_JOB_PARTITIONS = 2
            JOBWEAVER_DISPATCH_INTERVAL_SECONDS = 0.25
            JOBWEAVER_WORKER_HEARTBEAT_SECONDS = 0.5
            JOBWEAVER_WORKER_TTL_SECONDS = 2
        ''')
        )
    urls = (site / "config" / "urls.py").read_text()
    urls = urls.replace("from django.urls import path", "from django.urls import include, path")
    urls = urls.replace(
        "path('admin/', admin.site.urls),",
        "path('admin/', admin.site.urls),\n    path('jobweaver/', include('jobweaver.urls')),",
    ).replace(
        'path("admin/", admin.site.urls),',
        'path("admin/", admin.site.urls),\n    path("jobweaver/", include("jobweaver.urls")),',
    )
    (site / "config" / "urls.py").write_text(urls)

    manage = [python, "manage.py"]
    run(*manage, "makemigrations", "jobs", cwd=site, env=env)
    run(*manage, "migrate", "--noinput", cwd=site, env=env)
    assert "System check identified no issues" in run(*manage, "check", cwd=site, env=env)

    workers, logs = [], []
    try:
        for role in ("scheduler", "beat", "executor"):
            log = (tmp_path / f"{role}.log").open("w")
            logs.append(log)
            workers.append(
                subprocess.Popen(
                    [*map(str, manage), "jobweaver", "worker", role],
                    cwd=site,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        job_id = run(*manage, "shell", "-c", ENQUEUE, cwd=site, env=env).strip().splitlines()[-1]

        def receipts() -> str:
            return run(*manage, "shell", "-c", SHOW_RECEIPTS, cwd=site, env=env).splitlines()[-1]

        seen: list[str] = []
        try:
            wait_for(
                lambda: seen.append(receipts()) or seen[-1] == "['order-1']",
                timeout=90,
                interval=1,
                message="the host's task to write its receipt",
            )
        except AssertionError as error:
            executor = (tmp_path / "executor.log").read_text()[-3000:]
            raise AssertionError(f"{error}; receipts: {seen[-1:]}; executor: {executor}") from None
        print(
            f"adoption: venv, install, project, migrate, workers, first task: "
            f"{time.monotonic() - started:.1f} s"
        )

        run(
            *manage,
            "shell",
            "-c",
            "from django.contrib.auth.models import User; "
            "User.objects.create_user('reader').user_permissions.add(*__import__("
            "'django.contrib.auth.models', fromlist=['Permission']).Permission.objects.filter("
            "codename__in=['view_job', 'view_all_jobs']))",
            cwd=site,
            env=env,
        )
        token = (
            run(*manage, "create_api_token", "reader", "--name", "adoption", cwd=site, env=env)
            .strip()
            .split()[-1]
        )
        port = free_port()
        server = subprocess.Popen(
            [*map(str, manage), "runserver", "--noreload", f"127.0.0.1:{port}"],
            cwd=site,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        workers.append(server)

        def detail() -> dict | None:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/jobweaver/api/jobs/{job_id}",
                headers={"Authorization": f"Token {token}"},
            )
            try:
                with urllib.request.urlopen(request, timeout=2) as response:
                    return json.loads(response.read())
            except OSError:
                return None

        job = wait_for(detail, timeout=30, interval=0.5, message="the host's mounted API")
        assert (job["jobType"], job["status"], job["result"]) == ("TASK", "COMPLETED", 42)
        assert job["payload"]["task"] == "apps.jobs.tasks.issue_receipt"
        assert receipts() == "['order-1']"  # the rolled-back enqueue never ran
    finally:
        for process in workers:
            process.terminate()
        for process in workers:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        for log in logs:
            log.close()
