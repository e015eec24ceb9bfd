"""No import cycle between any two modules of the project (ARCHITECTURE §2).

import-linter's `acyclic_siblings` contract (pyproject.toml) checks cycles inside each package;
this checks the whole graph at module level, across apps, including function-local imports, so
no cycle can hide behind an import placed inside a function. Tests are left out: they may import
anything they exercise.
"""

from __future__ import annotations

import re
from pathlib import Path

import grimp

PACKAGES = ("jobweaver", "jobweaver_site", "kombu_kafka")


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively: the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _is_test(module: str) -> bool:
    return ".tests" in module or module.endswith(".conftest")


def project_graph() -> dict[str, set[str]]:
    graph = grimp.build_graph(*PACKAGES)
    modules = {m for m in graph.modules if not _is_test(m)}
    return {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}


def test_the_tarjan_helper_finds_a_cycle():
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        ["a", "b", "c"]
    ]


def test_no_module_level_import_cycles():
    cycles = _strongly_connected(project_graph())
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def _app_of(module: str) -> str | None:
    """`jobweaver.<app>` of a module; None for the shared core and for any app's models, which
    every layer may import (ARCHITECTURE §2)."""
    parts = module.split(".")
    if parts[0] != "jobweaver" or len(parts) < 2 or parts[1] == "core":
        return None
    if len(parts) > 2 and parts[2] == "models":
        return None
    return ".".join(parts[:2])


def app_graph() -> dict[str, set[str]]:
    """Which app imports which, models and core aside, function-local and TYPE_CHECKING
    imports included (grimp reads both)."""
    graph: dict[str, set[str]] = {}
    for module, imported in project_graph().items():
        source = _app_of(module) if module.startswith("jobweaver.") else None
        if source is None and module.startswith("jobweaver.") and ".models" not in module:
            continue  # the core
        if source is None:
            continue
        graph.setdefault(source, set())
        for target in imported:
            app = _app_of(target)
            if app is not None and app != source:
                graph[source].add(app)
    for targets in list(graph.values()):
        for target in targets:
            graph.setdefault(target, set())
    return graph


def test_no_two_apps_depend_on_each_other_directly_or_through_others():
    cycles = _strongly_connected(app_graph())
    assert cycles == [], "apps importing each other: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_nothing_imports_apps_the_directory_is_jobweaver():
    """`apps/` is only where `jobweaver`'s source lives (ARCHITECTURE §14): no import of
    `apps`, static or dynamic (a dotted path in a string), anywhere in the repository."""
    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"^\s*(from|import)\s+apps\b|[\"']apps\.[a-z]", re.MULTILINE)
    offenders = [
        str(path.relative_to(root))
        for folder in ("apps", "jobweaver_site", "kombu_kafka", "tests", "bench")
        for path in (root / folder).rglob("*.py")
        if pattern.search(path.read_text())
        # It writes a host project whose own package is named `apps`, on purpose.
        and path.name != "test_adoption.py"
    ]
    offenders += [
        name for name in ("conftest.py", "manage.py") if pattern.search((root / name).read_text())
    ]
    assert offenders == []
