"""The script's local modules: the files of the user's program that it imports.

Real projects split the training loop out of the script (``from train import train``,
``from mypkg.trainer import Trainer``), so fixing only the script leaves the code that
runs on the device unported. A module is local when Python would import it from the
script's own folder, the first entry of ``sys.path`` when Python runs a script, and it
is found here statically: every ``import``/``from ... import`` in the script (at any
depth: under ``if``, ``try`` or in a function), then in each local module found,
transitively. Imports made by name at run time (``importlib.import_module(name)``) are
not seen. Nothing under site-packages is ever local.

Resolution follows Python's path finder within the script's folder: a package with an
``__init__.py`` wins over a module file of the same name, which wins over a folder
without one (a namespace package, taken as local: ``src/`` layouts often have no
``__init__.py``). A local module shadows an installed one of the same name, as it does
when Python runs the script.
"""

from __future__ import annotations

import ast
import os
import re
import tokenize
from collections import deque
from dataclasses import dataclass
from pathlib import Path

#: Folders of installed code; a script there has no local modules.
_LIBRARY_PATH = re.compile(r"[/\\](site-packages|dist-packages)([/\\]|$)")
#: Enough for any training project; a script at the root of a huge tree stops here.
MAX_LOCAL_MODULES = 500


@dataclass(frozen=True)
class LocalModule:
    name: str  # the dotted name it is imported under, e.g. "mypkg.trainer"
    path: Path  # its file under the script's folder (``__init__.py`` for a package)

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


def is_installed_code(path: Path) -> bool:
    """The file is under site-packages (or dist-packages): installed code, never local."""
    return bool(_LIBRARY_PATH.search(str(path)))


def find_local_modules(script: Path, limit: int = MAX_LOCAL_MODULES) -> list[LocalModule]:
    """The local modules ``script`` imports, directly or through each other, in the
    order they were found (breadth first). The script itself is never listed, even
    when a module imports it by name: whatever runs it, runs its (fixed) file."""
    root = script.resolve().parent
    if _LIBRARY_PATH.search(str(root)):
        return []
    finder = _ModuleFinder(root)
    found: list[LocalModule] = []
    seen = {script.resolve()}
    pending = deque([LocalModule("__main__", script)])
    while pending and len(found) < limit:
        importer = pending.popleft()
        tree = _parse(importer.path)
        if tree is None:
            continue
        package = importer.name if importer.is_package else importer.name.rpartition(".")[0]
        for imported in imported_module_names(tree, package):
            for module in finder.resolve(imported):
                real = module.path.resolve()
                if real in seen or _LIBRARY_PATH.search(str(real)):
                    continue
                seen.add(real)
                found.append(module)
                pending.append(module)
    return found[:limit]


def imported_module_names(tree: ast.Module, package: str) -> list[str]:
    """Absolute names of the modules an import statement may load, in source order.

    ``import a.b`` loads ``a`` and ``a.b``; ``from a import b`` loads ``a`` and, when
    ``b`` is a submodule rather than a name defined in ``a``, ``a.b`` (both are listed;
    resolving tells them apart). Relative imports are resolved against ``package``
    (the importing module's package; "" for the script, where they cannot work).
    """
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names.extend(_with_parents(alias.name))
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            if base is None:
                continue
            if base:
                names.extend(_with_parents(base))
            for alias in node.names:
                if alias.name != "*":
                    names.append(f"{base}.{alias.name}" if base else alias.name)
    return list(dict.fromkeys(names))


def _absolute(module: str | None, level: int, package: str) -> str | None:
    """The absolute name ``from <level dots><module> import`` refers to; None when a
    relative import climbs out of the top-level package (an ImportError at run time)."""
    if level == 0:
        return module or None
    parts = package.split(".") if package else []
    if level - 1 >= len(parts):
        return None
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


class _ModuleFinder:
    """Finds a dotted name under ``root`` the way Python's path finder would."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._cache: dict[str, tuple[Path | None, bool]] = {}

    def resolve(self, name: str) -> list[LocalModule]:
        """The local module ``name`` is and the packages above it that have a file;
        [] when it is not local (installed, missing, or a name inside a module)."""
        modules = []
        for partial in _with_parents(name):
            file, is_package_like = self._locate(partial)
            if file is None and not is_package_like:
                return []
            if file is not None:
                modules.append(LocalModule(partial, file))
        return modules

    def _locate(self, name: str) -> tuple[Path | None, bool]:
        """(its file, whether submodules can be under it) for one dotted name."""
        if name not in self._cache:
            try:
                self._cache[name] = self._search(name)
            except OSError:  # a folder we may not read: Python could not import from it either
                self._cache[name] = (None, False)
        return self._cache[name]

    def _search(self, name: str) -> tuple[Path | None, bool]:
        parent, _, last = name.rpartition(".")
        if not last.isidentifier():
            return None, False
        if parent and not self._locate(parent)[1]:
            return None, False  # a module file has no submodules
        # Every local package is a folder under the root, named by its dotted name.
        folder = self._root.joinpath(*parent.split(".")) if parent else self._root
        init = folder / last / "__init__.py"
        if init.is_file():
            return init, True
        module = folder / f"{last}.py"
        if module.is_file():
            return module, False
        if (folder / last).is_dir():
            return None, True  # a namespace package: no file of its own
        return None, False


def _parse(path: Path) -> ast.Module | None:
    try:
        with tokenize.open(path) as file:
            return ast.parse(file.read(), filename=os.fspath(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError, RecursionError):
        return None
