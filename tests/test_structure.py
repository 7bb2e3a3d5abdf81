"""The package's shape: no import circle, no reach into another module's private names.

Both are read from the source with `ast`, never by importing: every ``import`` and
``from ... import`` counts wherever it stands (module level, in a function, under
``if TYPE_CHECKING:``). A function-level import that dodges a circle at run time is
still a circle to whoever reads the code, and a type-only import of the module that
builds you (an analysis importing the context it is given) is the circle of issue 20.
"""

from __future__ import annotations

import ast
from pathlib import Path

import xlalint

PACKAGE = Path(xlalint.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, ast.Module]:
    return {module_name(path): ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, node: ast.Import | ast.ImportFrom, known: dict[str, ast.Module]) -> list[tuple[str, str]]:
    """The package modules ``node`` (in module ``name``) imports, each with the name it takes
    from it ("" for ``import module``)."""
    if isinstance(node, ast.Import):
        return [(alias.name, "") for alias in node.names if alias.name in known]
    if node.level:
        # `from . import x` in a package's __init__ is relative to the package itself.
        is_package = PACKAGE.parent.joinpath(*name.split("."), "__init__.py").exists()
        parts = name.split(".") if is_package else name.split(".")[:-1]
        base = ".".join(parts[: len(parts) - node.level + 1])
        source = f"{base}.{node.module}" if node.module else base
    else:
        source = node.module or ""
    out = []
    for alias in node.names:
        if f"{source}.{alias.name}" in known:
            out.append((f"{source}.{alias.name}", ""))  # `from package import submodule`
        elif source in known:
            out.append((source, alias.name))
    return out


def import_graph(known: dict[str, ast.Module]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, tree in known.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name].update(target for target, _ in imported(name, node, known) if target != name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of ``graph`` with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                member = stack.pop()
                part.append(member)
                if member == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_function_level_and_type_checking_imports():
    known = {"xlalint.a": ast.Module([], []), "xlalint.b": ast.Module([], []), "xlalint.c": ast.Module([], [])}
    known["xlalint.a"] = ast.parse("def f():\n    from xlalint.b import thing\n")
    known["xlalint.b"] = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import xlalint.a\n")
    assert circles(import_graph(known)) == [["xlalint.a", "xlalint.b"]]


def test_no_import_circle():
    assert circles(import_graph(modules())) == []


def test_no_module_imports_another_modules_private_name():
    known = modules()
    reaches = [
        f"{name} imports {taken} from {source}"
        for name, tree in known.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for source, taken in imported(name, node, known)
        if taken.startswith("_") and not taken.startswith("__")
    ]
    # A private module (`rules/_cuda_api.py`) is its package's own: it may be imported
    # within that package, never from outside it.
    reaches += [
        f"{name} imports {source}"
        for name, tree in known.items()
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for source, _ in imported(name, node, known)
        if source.rsplit(".", 1)[-1].startswith("_")
        and not source.endswith("__")
        and not name.startswith(source.rsplit(".", 1)[0] + ".")
    ]
    assert reaches == []
