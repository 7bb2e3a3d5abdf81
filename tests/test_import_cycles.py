"""No import circle through the notebook code and the runner: every import counts,
those inside functions too (a function-level import does not break a circle, it hides it)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "xlalint"


def import_graph() -> dict[str, set[str]]:
    """Module name -> the xlalint modules it imports, anywhere in the module."""
    modules = {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): path
        for path in PACKAGE.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges = graph[name] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            edges.update(t for t in targets if t in modules and t != name)
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, stack = set(), [start]
    while stack:
        for target in graph[stack.pop()]:
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def test_notebook_and_runner_are_in_no_import_circle():
    graph = import_graph()
    for module in ("xlalint.linter.notebook", "xlalint.linter.runner", "xlalint.linter.file_report"):
        assert module not in reachable(graph, module), f"{module} imports itself through a circle"


def test_the_graph_sees_function_level_imports():
    # The check above would pass vacuously if imports inside functions were missed.
    # (session.py imports the config module inside `_prepare_versions` only.)
    assert "xlalint.linter.config" in import_graph()["xlalint.harness.session"]
