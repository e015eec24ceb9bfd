"""Only the job kinds registry (apps/jobs/kinds/) and the JobType choices (apps/jobs/models.py)
tell kinds apart by name: product code asks the registry. Read from the source with `ast`, no
import, no database: a `JobType.<KIND>` or a comparison of a job type with a string literal
anywhere else under apps/ fails this test."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parents[2] / "apps"
ALLOWED = ("jobs/kinds", "jobs/models.py")
JOB_TYPE_NAMES = {"job_type", "jobType"}


def _names_job_type(node: ast.AST) -> bool:
    """`job_type`, `x.job_type`, `x["jobType"]`, `x.get("job_type")` and the like."""
    if isinstance(node, ast.Name):
        return node.id in JOB_TYPE_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in JOB_TYPE_NAMES
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value in JOB_TYPE_NAMES
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        first = node.args[0]
        return (
            node.func.attr == "get"
            and isinstance(first, ast.Constant)
            and (first.value in JOB_TYPE_NAMES)
        )
    return False


def _is_string_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_is_string_literal(item) for item in node.elts)
    return False


def violations(source: str, filename: str = "<source>") -> list[str]:
    """Each place in `source` that names a kind through JobType or compares a job type with a
    string literal, as "file:line: what"."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "JobType"
            and node.attr.isupper()  # a member; JobType.choices / .values are fine
        ):
            found.append(f"{filename}:{node.lineno}: JobType.{node.attr}")
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(map(_names_job_type, operands)) and any(map(_is_string_literal, operands)):
                found.append(f"{filename}:{node.lineno}: job type compared with a literal")
    return found


def product_modules() -> list[Path]:
    modules = []
    for path in sorted(APPS.rglob("*.py")):
        relative = path.relative_to(APPS).as_posix()
        parts = set(path.relative_to(APPS).parts)
        if parts & {"tests", "migrations"} or relative.startswith(ALLOWED):
            continue
        modules.append(path)
    return modules


def test_product_code_asks_the_kinds_registry_instead_of_naming_a_kind():
    modules = product_modules()
    assert len(modules) > 50  # the walk found the apps
    found = [
        violation
        for path in modules
        for violation in violations(path.read_text(), str(path.relative_to(APPS.parent)))
    ]
    assert found == [], "ask jobweaver.jobs.kinds (kind_of, kind_named) instead:\n" + "\n".join(
        found
    )


@pytest.mark.parametrize(
    "source",
    [
        "task = job.instruction if job.job_type == JobType.TASK else None",
        "x = JobType.SIMULATION",
        'if job_type == "TASK": pass',
        'if "SIMULATION" != job.job_type: pass',
        'if data["job_type"] == "TASK": pass',
        'if body.get("jobType") in ("TASK", "SIMULATION"): pass',
    ],
)
def test_the_check_catches(source):
    assert violations(source)


@pytest.mark.parametrize(
    "source",
    [
        "kind = kind_of(job)",
        "choices = JobType.choices",
        "if job.job_type != TASK.name: pass",
        'if status == "FAILED": pass',
        'body = {"jobType": "TASK"}',
    ],
)
def test_the_check_lets_pass(source):
    assert violations(source) == []
