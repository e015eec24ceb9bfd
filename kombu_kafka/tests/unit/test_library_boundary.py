"""kombu_kafka is a library: importing it must not pull in Django or any JobWeaver module."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# kombu itself tries `import django` (kombu.utils.json, optional) whenever Django is installed,
# so the probe blocks host packages with an import hook: the import of kombu_kafka must still
# succeed (it does not need them), nothing of them may end up loaded, and no import attempt
# may come from kombu_kafka's own code.
PROBE = """
import importlib, json, pkgutil, sys

HOST = ("django", "apps", "jobweaver_site")
attempts = []

class BlockHost:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0].startswith(HOST[0]) or name.split(".")[0] in HOST:
            caller = sys._getframe(1)
            while caller and caller.f_code.co_filename.startswith("<frozen"):
                caller = caller.f_back
            attempts.append([name, caller.f_code.co_filename if caller else "?"])
            raise ImportError(f"blocked host import {name}")
        return None

sys.meta_path.insert(0, BlockHost())
import kombu_kafka
for info in pkgutil.walk_packages(kombu_kafka.__path__, "kombu_kafka."):
    if ".tests" not in info.name:
        importlib.import_module(info.name)
loaded = sorted(m for m in sys.modules if m.startswith("kombu_kafka"))
host = sorted(m for m in sys.modules if m.split(".")[0].startswith("django")
              or m.split(".")[0] in HOST)
print(json.dumps({"loaded": loaded, "host": host, "attempts": attempts}))
"""


def test_importing_the_package_loads_no_django_and_no_host_module():
    # A fresh interpreter: this test process has Django loaded by pytest-django already.
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(result.stdout)
    assert {"kombu_kafka", "kombu_kafka.offsets", "kombu_kafka.transport"} <= set(report["loaded"])
    assert report["host"] == []
    package = str(ROOT / "kombu_kafka")
    assert [a for a in report["attempts"] if a[1].startswith(package)] == []
