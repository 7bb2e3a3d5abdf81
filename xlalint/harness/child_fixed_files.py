"""The user's files the fix changed run from their fixed copies, in place of the user's
files and under their names, in every process (stdlib only; runs inside the user's
processes as ``_xlalint_fixed_files``; see ``bootstrap.py``)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import runpy
import sys
import types

#: A JSON file {the user's file (real path): its fixed copy}: the files whose fixed
#: copy runs in their place.
FIXED_FILES_ENV = "XLALINT_HARNESS_FIXED_FILES"


def install() -> None:
    """Run the fixed copies in place of the user's files, if this run has any."""
    fixed_files = read_fixed_files()
    if not fixed_files:
        return
    # Just before the path finder: built-in and frozen modules still win over a
    # user's file of the same name, as they do without the harness.
    finders = sys.meta_path
    at = finders.index(importlib.machinery.PathFinder) if importlib.machinery.PathFinder in finders else len(finders)
    finders.insert(at, FixedSourceFinder(fixed_files))
    # multiprocessing's spawn runs the main script again in each worker, by path.
    runpy.run_path = run_path_fixed


_FIXED_FILES: dict[str, str] | None = None
_original_run_path = runpy.run_path


def read_fixed_files() -> dict[str, str]:
    global _FIXED_FILES
    if _FIXED_FILES is None:
        path = os.environ.get(FIXED_FILES_ENV)
        try:
            with open(path, encoding="utf-8") as file:
                _FIXED_FILES = {str(user): str(fixed) for user, fixed in json.load(file).items()}
        except (TypeError, OSError, ValueError, AttributeError):
            _FIXED_FILES = {}
    return _FIXED_FILES


def fixed_copy_of(path: str) -> str | None:
    return read_fixed_files().get(os.path.realpath(path))


def compile_fixed(fixed_path: str):
    # Compiled under the copy's name: frames, debug causes and tracebacks show the
    # code that ran (the harness maps its lines back to the user's file).
    with open(fixed_path, "rb") as file:
        return compile(file.read(), fixed_path, "exec", dont_inherit=True)


class FixedSourceLoader(importlib.machinery.SourceFileLoader):
    """Loads the user's module with its fixed copy's code. Everything else stays the
    user's: ``__file__``, a package's ``__path__`` (its submodules, its data files),
    ``importlib.resources``. Nothing is cached in the user's ``__pycache__``."""

    def __init__(self, fullname: str, path: str, fixed_path: str) -> None:
        super().__init__(fullname, path)
        self.fixed_path = fixed_path

    def get_code(self, fullname):
        return compile_fixed(self.fixed_path)

    def get_source(self, fullname):
        with open(self.fixed_path, "rb") as file:
            return importlib.util.decode_source(file.read())


class FixedSourceFinder:
    """A meta path finder: a module Python would load from one of the user's files
    that the fix changed gets its fixed copy's code (``FixedSourceLoader``).

    The user's file is found as Python would find it (the path finder, with the
    script's folder first on ``sys.path``), so a module is fixed under any name it
    is imported by. Only names whose last part is a fixed file's are looked up.
    """

    def __init__(self, fixed_files: dict[str, str]) -> None:
        self._fixed_files = fixed_files
        self._stems = {_module_stem(path) for path in fixed_files}

    def find_spec(self, name, path=None, target=None):
        if name.rpartition(".")[2] not in self._stems:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not spec.has_location or not spec.origin:
            return None
        fixed_path = self._fixed_files.get(os.path.realpath(spec.origin))
        if fixed_path is None:
            return None
        spec.loader = FixedSourceLoader(name, spec.origin, fixed_path)
        return spec

    def invalidate_caches(self) -> None:
        pass


def _module_stem(path: str) -> str:
    """The last part of the name a file is imported under: a package's folder name."""
    folder, filename = os.path.split(path)
    stem = os.path.splitext(filename)[0]
    return os.path.basename(folder) if stem == "__init__" else stem


def run_path_fixed(path_name, init_globals=None, run_name=None):
    """``runpy.run_path``, running a fixed copy's code in place of the user's file."""
    fixed_path = fixed_copy_of(os.fspath(path_name)) if isinstance(path_name, (str, os.PathLike)) else None
    if fixed_path is None:
        return _original_run_path(path_name, init_globals, run_name)
    return run_code_as_file(compile_fixed(fixed_path), os.fspath(path_name), run_name or "<run_path>", init_globals)


def run_code_as_file(code, path: str, run_name: str, init_globals=None) -> dict:
    """Run ``code`` as ``runpy.run_path(path, run_name=run_name)`` runs the file: a
    fresh module in ``sys.modules`` and ``sys.argv[0] = path`` while it runs."""
    module = types.ModuleType(run_name)
    if init_globals is not None:
        module.__dict__.update(init_globals)
    module.__dict__.update(
        __file__=path, __cached__=None, __loader__=None, __package__=run_name.rpartition(".")[0], __spec__=None
    )
    missing = object()
    saved_module = sys.modules.get(run_name, missing)
    saved_argv0 = sys.argv[0] if sys.argv else missing
    sys.modules[run_name] = module
    if sys.argv:
        sys.argv[0] = path
    try:
        exec(code, module.__dict__)
    finally:
        if saved_module is missing:
            sys.modules.pop(run_name, None)
        else:
            sys.modules[run_name] = saved_module
        if saved_argv0 is not missing:
            sys.argv[0] = saved_argv0
    return dict(module.__dict__)
