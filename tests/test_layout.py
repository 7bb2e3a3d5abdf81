"""The layout (CONTRIBUTING.md, "The layout"): the engine drives the rules, the rules ask
the analyses, and an analysis knows nothing of either.

Read from the source with ``ast``, as tests/test_structure.py reads the import graph:
every import counts wherever it stands (in a function, under ``if TYPE_CHECKING:``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import xlalint
from xlalint.engine.cache import code_fingerprint

PACKAGE = Path(xlalint.__file__).parent
MODEL = "xlalint.model"
# What a rule may take from the engine: the rule API and the context it is given.
# What a rule may take from the engine: the rule API, the Context, and the noqa comments
# the engine hands a rule after suppression (XLA100 reads which of them hid nothing).
RULE_API = {"xlalint.engine.rule", "xlalint.engine.context", "xlalint.engine.noqa"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, ast.Module]:
    return {module_name(path): ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def imported_modules(name: str, tree: ast.Module, known: set[str]) -> set[str]:
    """The xlalint modules module ``name`` imports (``from package import module`` names
    the module, ``from module import thing`` the module)."""
    is_package = PACKAGE.parent.joinpath(*name.split("."), "__init__.py").exists()
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name.split(".")[0] == "xlalint")
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                parts = name.split(".") if is_package else name.split(".")[:-1]
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{source}" if node.module else base
            if source.split(".")[0] != "xlalint":
                continue
            for alias in node.names:
                out.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source)
    return out


def reaches(known: dict[str, ast.Module], importer: str, allowed) -> list[str]:
    """``importer`` (a package prefix) importing an xlalint module ``allowed`` refuses."""
    names = set(known)
    return sorted(
        f"{name} imports {target}"
        for name, tree in known.items()
        if name == importer or name.startswith(importer + ".")
        for target in imported_modules(name, tree, names)
        if not allowed(target)
    )


def analysis_may_import(target: str) -> bool:
    return target == MODEL or target == "xlalint.analysis" or target.startswith("xlalint.analysis.")


def test_the_check_sees_an_analysis_reaching_into_the_engine():
    known = {
        "xlalint.analysis.a": ast.parse("def f():\n    from xlalint.engine.config import Settings\n"),
        "xlalint.analysis.b": ast.parse("from xlalint import model\nfrom xlalint.analysis import a\n"),
        "xlalint.engine.config": ast.Module([], []),
        "xlalint.model": ast.Module([], []),
    }
    assert reaches(known, "xlalint.analysis", analysis_may_import) == [
        "xlalint.analysis.a imports xlalint.engine.config"
    ]


def test_an_analysis_imports_only_analyses_and_the_model():
    assert reaches(modules(), "xlalint.analysis", analysis_may_import) == []


def test_the_model_imports_nothing_of_xlalint():
    assert reaches(modules(), MODEL, lambda target: False) == []


def test_a_rule_takes_from_the_engine_only_the_rule_api():
    assert reaches(modules(), "xlalint.rules", lambda t: not t.startswith("xlalint.engine") or t in RULE_API) == []


def test_the_cache_fingerprint_covers_every_module_that_decides_findings():
    # A module the fingerprint misses can change findings without invalidating the cache.
    deciding = {"model.py"} | {
        path.relative_to(PACKAGE).as_posix()
        for folder in ("engine", "analysis", "rules", "fixers")
        for path in (PACKAGE / folder).rglob("*.py")
    }
    assert {line.rsplit(":", 2)[0] for line in code_fingerprint().splitlines()} == deciding
