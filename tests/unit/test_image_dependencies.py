"""The image installs what the site runs, nothing of the dev venv's tools (issue 35): the
Dockerfile installs django-jobweaver with the `site` and `otel` extras only, taking
requirements.txt (the dev lock, with pytest, selenium, ruff…) as version constraints, never as
a list of packages to install."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
IMAGE_EXTRAS = {"site", "otel"}


def name(requirement: str) -> str:
    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower()


def pip_installs() -> list[list[str]]:
    """The arguments of every `pip install` in the Dockerfile's RUN instructions."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        if line.startswith("RUN "):
            for command in re.split(r"&&|;", line[4:]):
                words = shlex.split(command)
                if words[:2] == ["pip", "install"]:
                    commands.append(words[2:])
    return commands


def test_the_image_installs_the_runtime_extras_with_the_lock_as_constraints_only():
    (arguments,) = pip_installs()

    assert "-r" not in arguments and "--requirement" not in arguments
    assert "-c" in arguments  # the lock pins versions, it adds nothing
    (target,) = [a for a in arguments if a.startswith("django-jobweaver")]
    assert set(re.fullmatch(r"django-jobweaver\[(.*)\]", target).group(1).split(",")) == (
        IMAGE_EXTRAS
    )


def test_no_test_lint_docs_or_dev_tool_is_a_runtime_dependency():
    extras = PROJECT["optional-dependencies"]
    installed = {name(r) for r in PROJECT["dependencies"]}
    installed |= {name(r) for extra in IMAGE_EXTRAS for r in extras[extra]}
    tools = {name(r) for extra in ("test", "lint", "docs", "dev") for r in extras[extra]}

    assert {"pytest", "selenium", "ruff", "honcho"} <= tools
    assert installed & tools == set()
