"""What a host project's settings and models may import (ARCHITECTURE §14): `jobweaver` and
`jobweaver.tasks` load nothing of Django on import (a settings module imports them before Django
is configured), and their exports resolve on use."""

from __future__ import annotations

import subprocess
import sys

import jobweaver


def _fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_importing_the_packages_loads_no_django():
    code = (
        "import sys, jobweaver, jobweaver.tasks; "
        "sys.exit(sorted(m for m in sys.modules if m.split('.')[0] == 'django') != [])"
    )
    assert _fresh(code).returncode == 0


def test_installed_apps_appends_only_what_is_missing_in_order():
    existing = ["django.contrib.admin", "rest_framework", "myapp"]

    apps = jobweaver.installed_apps(existing)

    assert apps[:3] == existing
    assert apps.count("rest_framework") == 1
    assert apps[3:] == [app for app in jobweaver.INSTALLED_APPS if app != "rest_framework"]
    assert apps.index("jobweaver.jobs") < apps.index("jobweaver.tasks")


def test_an_unknown_export_is_an_attribute_error():
    code = "import jobweaver.tasks as t\ntry:\n t.Nope\nexcept AttributeError:\n print('ok')"
    assert _fresh(code).stdout.strip() == "ok"
