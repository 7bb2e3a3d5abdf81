"""The project index: the local modules a checked file imports, found as Python finds
them when the file runs as a script (``python train.py``), read and parsed, never
imported or executed.

Where a module is looked for, in order (``sys.path`` of ``python train.py`` without the
interpreter's own folders):

1. the script's folder;
2. the project root: the folder of the xlalint config in use, else the nearest folder
   above the script with ``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git`` (a
   release archive or a vendored copy has no ``.git``); and its ``src/``. That is where
   an editable install of the project points; site-packages are never read, so no other
   installed package is.

In each folder a package (``pkg/__init__.py``) comes before a module (``pkg.py``), and a
folder without ``__init__.py`` is a namespace package, as for Python's path finder.
Relative imports (``from .model import GPT``) resolve from the importing module's folder.

The files are untrusted input: only regular files of at most the source size limit are
read, and only when their real path is inside the project root (or the script's folder
when there is no root), so a symbolic link that leads out of the project is ignored.
Each file is parsed once per process (the fix loop and the language server check the
same file again and again): the parse is kept by real path, size and modification time.

The index is built on first use: a file whose rules never ask about an imported class
costs nothing. A check that read a local module depends on it: :func:`recording` tells
the caller which modules were read (the result cache does not keep such results).
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import sys
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from xlalint.analysis import told

if TYPE_CHECKING:
    from collections.abc import Callable

    from xlalint.analysis.semantic import Semantic

# The markers of a project root: a repository, or what `pip install -e .` installs from.
ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# Paths a module read from stdin is reported under: it has no folder to import from.
NO_FOLDER = frozenset({"-", "<stdin>", ""})
# The standard library and the libraries a training script imports its models from: no
# project shadows them, and a call to one of their classes is never looked up on disk
# (a check of a file that imports only these stats nothing).
NOT_LOCAL = frozenset(sys.stdlib_module_names) | frozenset(
    {"torch", "torch_xla", "transformers", "accelerate", "torchvision", "timm", "numpy", "peft", "diffusers", "jax"}
)
# How many re-exports (``from .model import GPT`` in ``pkg/__init__.py``) are followed.
MAX_REEXPORTS = 4
# Parsed modules kept per process; past this the oldest go (a long-lived language server).
MAX_PARSED = 2048


class LocalModule:
    """A module of the project, parsed: its real path and its tree (no parent links)."""

    def __init__(self, path: Path, tree: ast.Module):
        self.path = path
        self.tree = tree

    @property
    def folder(self) -> Path:
        return self.path.parent

    @cached_property
    def bindings(self) -> dict[str, ast.stmt]:
        """Module-level name -> the last statement that binds it to a class or by an
        import (also inside a module-level ``if``/``try``: ``try: from .x import C``)."""
        found: dict[str, ast.stmt] = {}
        stack = list(reversed(self.tree.body))
        while stack:
            node = stack.pop()
            if isinstance(node, ast.ClassDef):
                found[node.name] = node
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.name != "*":
                        found[alias.asname or alias.name] = node
            elif isinstance(node, (ast.If, ast.Try)):
                handlers = [h for handler in getattr(node, "handlers", ()) for h in handler.body]
                stack.extend(reversed([*node.body, *handlers, *node.orelse, *getattr(node, "finalbody", ())]))
        return found


@dataclass(frozen=True)
class LocalClass:
    """A class defined in a module of the project."""

    name: str
    node: ast.ClassDef
    module: LocalModule


# Real path -> (size, modification time, the module or None when it cannot be read or parsed).
_parsed: dict[str, tuple[int, int, LocalModule | None]] = {}
_reads: ContextVar[set[str] | None] = ContextVar("xlalint_project_reads", default=None)


@contextlib.contextmanager
def recording() -> Iterator[set[str]]:
    """The real paths of the local modules read (or found in the per-process cache)
    while the block runs: what the findings made in it depend on besides the file."""
    reads: set[str] = set()
    token = _reads.set(reads)
    try:
        yield reads
    finally:
        _reads.reset(token)


# The roots found so far in a run of many files (``one_run``): by folder and config root.
_roots: ContextVar[dict[tuple[Path, str | None], Path | None] | None] = ContextVar("xlalint_roots", default=None)


@contextlib.contextmanager
def one_run() -> Iterator[None]:
    """While the block runs, each folder's project root is looked for once: the files
    of a run share a few folders, and the walk up a folder's parents stats four markers
    a level (a warm check of 300 files spent an eighth of its time there)."""
    token = _roots.set({})
    try:
        yield
    finally:
        _roots.reset(token)


def project_root(script: Path, config_root: str | None) -> Path | None:
    """The folder of the config in use when the script is inside it, else the nearest
    folder above the script with one of ``ROOT_MARKERS``, else None."""
    found = _roots.get()
    if found is None:
        return _project_root(script, config_root)
    key = (script.parent, config_root)
    if key not in found:
        found[key] = _project_root(script, config_root)
    return found[key]


def _project_root(script: Path, config_root: str | None) -> Path | None:
    if config_root:
        root = Path(os.path.realpath(config_root))
        if script.is_relative_to(root):
            return root
    for folder in script.parents:
        if any(os.path.exists(folder / marker) for marker in ROOT_MARKERS):
            return folder
    return None


class ProjectIndex:
    """The modules importable by one script: found, read and parsed on demand."""

    def __init__(self, script: Path, root: Path | None, read_text: Callable[[Path], str | None] | None = None):
        self.script = script
        self.root = root
        # The engine's reader (size limit, encoding cookie), which gives None for a file it
        # refuses; without one the index finds files and reads none.
        self.read_text = read_text
        folders = [script.parent]
        if root is not None:
            folders += [root, root / "src"]
        self.search_path = list(dict.fromkeys(f for f in folders if os.path.isdir(f)))
        # Files are read only from inside here (a link out of the project is not followed).
        self.area = root if root is not None and script.is_relative_to(root) else script.parent

    def module(self, dotted: str, folders: list[Path] | None = None) -> LocalModule | None:
        """The module ``dotted`` (``pkg.model``) as Python's path finder finds it in
        ``folders`` (the search path by default); None when it is not a local module."""
        locations = self.search_path if folders is None else folders
        found: Path | None = None
        for part in dotted.split("."):
            if not part.isidentifier():
                return None
            found, locations = _find_in(part, locations)
            if found is None and not locations:
                return None
        return self._load(found) if found is not None else None

    def import_files(self, folder: Path, level: int, dotted: str, names: tuple[str, ...] = ()) -> list[Path]:
        """The files ``import dotted`` (``from <level dots><dotted> import names`` with
        a level, from a module of ``folder``) runs when it is a local module: each
        package's ``__init__.py`` on the way, the module's file, and those of the
        ``names`` that are its submodules; as found on the search path (a symbolic link
        is not resolved: the caller decides what it may write). Empty when it is not
        local."""
        if level:
            for _ in range(level - 1):
                folder = folder.parent
            if not folder.is_relative_to(self.area):
                return []
            locations = [folder]
            init = folder / "__init__.py"
            files = [init] if os.path.isfile(init) else []
        else:
            locations, files = self.search_path, []
        for part in dotted.split(".") if dotted else ():
            if not part.isidentifier() or not locations:
                return []
            found, locations = _find_in(part, locations)
            if found is None and not locations:
                return []
            if found is not None:
                files.append(found)
        # `from pkg import trainer` runs pkg/trainer.py when it is a submodule.
        for name in names if locations else ():
            if name.isidentifier():
                found, _ = _find_in(name, locations)
                if found is not None:
                    files.append(found)
        return files

    def module_file(self, folder: Path, level: int, dotted: str) -> Path | None:
        """The file of the module ``dotted`` (with ``level`` dots, from a module of
        ``folder``) when it is a local module with a file (a package: its
        ``__init__.py``); as found on the search path, links not resolved."""
        if level:
            for _ in range(level - 1):
                folder = folder.parent
            if not folder.is_relative_to(self.area):
                return None
            if not dotted:
                init = folder / "__init__.py"
                return init if os.path.isfile(init) else None
            locations = [folder]
        else:
            locations = self.search_path
        found: Path | None = None
        for part in dotted.split(".") if dotted else ():
            if not part.isidentifier() or not locations:
                return None
            found, locations = _find_in(part, locations)
        return found

    def relative_module(self, folder: Path, level: int, dotted: str) -> LocalModule | None:
        """``from <level dots><dotted> import ...`` in a module of ``folder``."""
        for _ in range(level - 1):
            folder = folder.parent
        if not folder.is_relative_to(self.area):
            return None
        return self.module(dotted, [folder]) if dotted else self._load_package(folder)

    def local_class(self, level: int, dotted: str, folder: Path | None = None) -> LocalClass | None:
        """The class that ``dotted`` (``model.RNNModel``, ``pkg.model.GPT``; relative to
        ``folder`` with ``level`` dots) names, when a local module defines it."""
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, -1 if level else 0, -1):
            module_name, names = ".".join(parts[:cut]), parts[cut:]
            if level:
                module = self.relative_module(folder or self.script.parent, level, module_name)
            else:
                module = self.module(module_name)
            if module is not None:
                return self.class_in(module, names[0], MAX_REEXPORTS) if len(names) == 1 else None
        return None

    def class_in(self, module: LocalModule, name: str, depth: int) -> LocalClass | None:
        """The class ``module`` binds to ``name``: defined there, or imported from
        another local module (a package's ``__init__.py`` re-exporting it)."""
        statement = module.bindings.get(name)
        if isinstance(statement, ast.ClassDef):
            return LocalClass(name, statement, module)
        if not isinstance(statement, ast.ImportFrom) or depth <= 0:
            return None
        original = next(a.name for a in statement.names if (a.asname or a.name) == name)
        if statement.level:
            source = self.relative_module(module.folder, statement.level, statement.module or "")
        else:
            source = self.module(statement.module or "")
        if source is None:
            # `from . import model` binds a submodule, not a class.
            return None
        return self.class_in(source, original, depth - 1)

    def _load_package(self, folder: Path) -> LocalModule | None:
        init = folder / "__init__.py"
        return self._load(init) if os.path.isfile(init) else None

    def _load(self, path: Path) -> LocalModule | None:
        if self.read_text is None:
            return None  # an index that only finds files (and must not cache "unreadable")
        real = os.path.realpath(path)
        if not Path(real).is_relative_to(self.area):
            return None  # a symbolic link out of the project
        try:
            info = os.stat(real)
        except OSError:
            return None
        reads = _reads.get()
        if reads is not None:
            reads.add(real)
        known = _parsed.get(real)
        if known is not None and known[:2] == (info.st_size, info.st_mtime_ns):
            return known[2]
        module = _parse(Path(real), self.read_text)
        if len(_parsed) >= MAX_PARSED:
            _parsed.pop(next(iter(_parsed)))
        _parsed[real] = (info.st_size, info.st_mtime_ns, module)
        return module


def _find_in(part: str, locations: list[Path]) -> tuple[Path | None, list[Path]]:
    """One step of the path finder: the file of ``part`` in the first of ``locations``
    that has it, and where its submodules are (none for a plain module). A namespace
    package (a folder without ``__init__.py``) has no file and spans every folder."""
    namespace: list[Path] = []
    for folder in locations:
        package = folder / part
        # os.path's tests, not Path's: on Python 3.11 Path.is_file raises for a path over
        # PATH_MAX, and an import in a file deep in a tree must not end the check.
        if os.path.isfile(package / "__init__.py"):
            return package / "__init__.py", [package]
        if os.path.isfile(folder / f"{part}.py"):
            return folder / f"{part}.py", []
        if os.path.isdir(package):
            namespace.append(package)
    return None, namespace


def _parse(path: Path, read_text: Callable[[Path], str | None] | None) -> LocalModule | None:
    text = read_text(path) if read_text is not None else None
    if text is None:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            return LocalModule(path, ast.parse(text, filename=str(path)))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


class ProjectView:
    """What the checked module imports from its project, seen from that module: built
    on first use, from its path (a module read from stdin has no folder: it imports
    nothing local)."""

    def __init__(self, path: str, config_root: str | None, semantic: Semantic, read_text: Callable[[Path], str | None]):
        self.path = path
        self.config_root = config_root
        self.semantic = semantic
        self.read_text = read_text

    @cached_property
    def index(self) -> ProjectIndex | None:
        if self.path in NO_FOLDER:
            return None
        script = Path(os.path.realpath(self.path))
        return ProjectIndex(script, project_root(script, self.config_root), self.read_text)

    @cached_property
    def _relative_imports(self) -> dict[str, tuple[int, str]]:
        """Name -> (level, dotted) for ``from .model import GPT`` (the semantic layer
        keeps absolute imports only)."""
        found: dict[str, tuple[int, str]] = {}
        for node in self.semantic.nodes_of(ast.ImportFrom):
            if node.level:
                for alias in node.names:
                    if alias.name != "*":
                        dotted = f"{node.module}.{alias.name}" if node.module else alias.name
                        found[alias.asname or alias.name] = (node.level, dotted)
        return found

    def origin(self, func: ast.expr) -> tuple[int, str] | None:
        """Where an imported name or attribute chain comes from: (level, dotted name),
        when it may be a local module's (not one of the libraries in ``NOT_LOCAL``)."""
        root = func
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name):
            return None
        qualified = self.semantic.qualified_name(func)
        if qualified is not None:
            return None if qualified.split(".", 1)[0] in NOT_LOCAL else (0, qualified)
        relative = self._relative_imports.get(root.id)
        if relative is None:
            return None
        chain: list[str] = []
        node = func
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        return relative[0], ".".join([relative[1], *reversed(chain)])

    def may_import_local(self) -> bool:
        """A cheap first test, without the filesystem: the module imports a name that
        may come from a local module."""
        return bool(self._relative_imports) or any(
            module.split(".", 1)[0] not in NOT_LOCAL for module in self.semantic.imports.imported_modules
        )

    def class_of(self, func: ast.expr) -> LocalClass | None:
        """The local class that ``func`` (the callee of ``Model(...)``) names, if an
        import brings it from a module of the project."""
        origin = self.origin(func)
        if origin is None or self.index is None:
            return None
        # Asked once per name in a check: a file that builds the class a thousand times
        # stats its module once.
        if origin not in self._classes:
            self._classes[origin] = self.index.local_class(*origin)
        return self._classes[origin]

    @cached_property
    def _classes(self) -> dict[tuple[int, str], LocalClass | None]:
        return {}


# An import statement's module part: `import a.b, c as d` / `from .x import ...`, at the
# start of a line or after `;`/`:` (`try: import model`).
_IMPORT_LINE = re.compile(r"(?:^|[;:])[ \t]*(import|from)(?=[ \t.])[ \t]*([^\n#;]*)", re.MULTILINE)


def _may_import_local(text: str) -> bool:
    """A cheap first test on the text: some import names a module outside ``NOT_LOCAL``
    (or a relative one). It may say yes wrongly (a docstring line), never no: a line it
    cannot read (a continuation) counts as yes."""
    for match in _IMPORT_LINE.finditer(text):
        kind, rest = match.groups()
        if "\\" in rest or rest.startswith("."):
            return True
        if kind == "from":
            modules = rest.split()[:1]
        else:
            modules = [piece.split()[0] for piece in rest.split(",") if piece.split()]
        if any(module.split(".", 1)[0] not in NOT_LOCAL for module in modules):
            return True
    return False


# The fields that hold statements: a body, an else, a finally, except handlers, match cases.
_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")
# What a module imports, from its text alone: (level, dotted, names) for each import
# that may run a local module (level 0: absolute; names: of ``from dotted import names``).
ImportSpec = tuple[int, str, tuple[str, ...]]


def import_specs(text: str, path: str, tree: ast.Module | None = None) -> list[ImportSpec]:
    """The modules the module ``text`` (parsed: ``tree``, when the caller has it) may
    import from its project: every import in it, also inside functions (the training
    loop runs them), in order, each once; none of the libraries in ``NOT_LOCAL``.
    Cheap when the text imports only those."""
    if not _may_import_local(text):
        return []
    if tree is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SyntaxWarning)
                tree = ast.parse(text.removeprefix("\ufeff"), filename=path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return []
    specs: dict[ImportSpec, None] = {}
    # Statements only (an import is one): a fraction of the nodes of ``ast.walk``.
    stack: list[ast.AST] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        for block in _BLOCKS:
            children = getattr(node, block, None)
            if children:
                stack.extend(reversed(children))
        if isinstance(node, ast.Import):
            specs.update(dict.fromkeys((0, a.name, ()) for a in node.names if a.name.split(".", 1)[0] not in NOT_LOCAL))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level or module.split(".", 1)[0] not in NOT_LOCAL:
                specs[(node.level, module, tuple(a.name for a in node.names if a.name != "*"))] = None
    return list(specs)


def resolve_imports(specs: list[ImportSpec], path: str, script: str | None, config_root: str | None) -> list[Path]:
    """The local module files ``specs`` (imported by the module at ``path``) name, as
    ``python script`` would find them (``script``: the program run, ``path`` itself
    when None), with the packages on the way: paths as found (links not resolved),
    each once. Only the filesystem is asked: the text was read before."""
    if path in NO_FOLDER or not specs:
        return []
    program = Path(os.path.realpath(script or path))
    index = ProjectIndex(program, project_root(program, config_root))
    folder = Path(os.path.abspath(path)).parent
    found: dict[Path, None] = {}
    for level, dotted, names in specs:
        found.update(dict.fromkeys(index.import_files(folder, level, dotted, names)))
    return list(found)


# A function another module defines, as a module names it: (level, dotted), the dotted
# name ending with the function's (``(0, "data.prepare_dataloader")``).
FunctionSpec = tuple[int, str]


def resolve_functions(
    specs: list[FunctionSpec], path: str, script: str | None, config_root: str | None
) -> dict[str, tuple[str, ...]]:
    """The local module files the functions ``specs`` (named in the module at ``path``,
    each maybe with a fact about it: ``analysis/told.py``) are looked up in, by real
    path, each with the names (and facts) looked up there, sorted; found
    as :func:`resolve_imports` finds modules (only the filesystem is asked). A function a
    package re-exports is looked up in the package's ``__init__.py``."""
    if path in NO_FOLDER or not specs:
        return {}
    program = Path(os.path.realpath(script or path))
    index = ProjectIndex(program, project_root(program, config_root))
    folder = Path(os.path.abspath(path)).parent
    found: dict[str, set[str]] = {}
    for level, dotted in specs:
        # A fact past the name (``engine.train_one_epoch(6=update)``, ``analysis/told.py``)
        # is told with it; the module is what comes before the function's name.
        function = told.function_of(dotted)
        module, _, name = function.rpartition(".")
        name += dotted[len(function) :]
        file = index.module_file(folder, level, module) if told.function_of(name).isidentifier() else None
        if file is not None:
            found.setdefault(os.path.realpath(file), set()).add(name)
    return {file: tuple(sorted(names)) for file, names in found.items()}


def local_imports(text: str, path: str, script: str | None, config_root: str | None) -> list[Path]:
    """The local module files the module ``text``, read from ``path``, imports."""
    return resolve_imports(import_specs(text, path), path, script, config_root)
