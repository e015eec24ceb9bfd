"""Only the engine writes a status (ARCHITECTURE §2): no product module outside apps/engine
sets the `status` of an execution (or, later, of a workflow), in Python or in SQL.

Read from the source with `ast`, so it runs in milliseconds with no database. What counts as a
write: an assignment to `<something>.status`, a `status=` keyword of `.update()`, `.create()`,
`.bulk_create()`, `update_or_create()` or `get_or_create()`, `"status"` in `update_fields` or
`bulk_update` fields, and SQL text that sets `status`. Tests are left out: they build states.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "apps" / "engine"
WRITING_CALLS = {"update", "create", "bulk_create", "update_or_create", "get_or_create"}
SQL_SETS_STATUS = re.compile(r"\bSET\b[^;]*?\bstatus\s*=", re.IGNORECASE | re.DOTALL)


def _product_modules():
    for path in sorted((ROOT / "apps").rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if "tests" in parts or "migrations" in parts or path.is_relative_to(ENGINE):
            continue
        yield path


def status_writes(source: str) -> list[int]:
    """The line numbers of the status writes in a module's source."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Attribute) and t.attr == "status" for t in targets):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            keywords = {k.arg: k.value for k in node.keywords}
            if name in WRITING_CALLS and "status" in keywords:
                lines.append(node.lineno)
            fields = keywords.get("update_fields") or (
                node.args[1] if name == "bulk_update" and len(node.args) > 1 else None
            )
            if fields is not None and any(
                isinstance(c, ast.Constant) and c.value == "status" for c in ast.walk(fields)
            ):
                lines.append(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "UPDATE" in node.value.upper() and SQL_SETS_STATUS.search(node.value):
                lines.append(node.lineno)
        elif isinstance(node, ast.JoinedStr):
            text = "".join(
                v.value
                for v in node.values
                if isinstance(v, ast.Constant) and isinstance(v.value, str)
            )
            if "UPDATE" in text.upper() and SQL_SETS_STATUS.search(text):
                lines.append(node.lineno)
    return lines


def test_the_check_finds_each_way_of_writing_a_status():
    writes = """
execution.status = "FAILED"
JobExecution.objects.filter(id=1).update(status="PENDING")
JobExecution.objects.create(job=job, status="RUNNING")
execution.save(update_fields=["status", "version"])
JobExecution.objects.bulk_update(rows, ["status"])
cursor.execute("UPDATE jobweaver_execution SET status = 'FAILED' WHERE id = %s")
cursor.execute(f"UPDATE {table} e SET version = 1, status = {target} WHERE id = %s")
"""
    assert status_writes(writes) == [2, 3, 4, 5, 6, 7, 8]
    reads = """
status = execution.status
JobExecution.objects.filter(status="PENDING").count()
cursor.execute("SELECT status FROM t WHERE status = 'PENDING'")
"""
    assert status_writes(reads) == []


def test_no_status_is_written_outside_the_engine():
    found = {
        str(path.relative_to(ROOT)): lines
        for path in _product_modules()
        if (lines := status_writes(path.read_text()))
    }
    assert found == {}, f"status written outside apps/engine (move it into a transition): {found}"
