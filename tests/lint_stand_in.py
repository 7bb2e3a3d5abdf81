"""A slow lint for the language server's tests: a text document with a line
``# hold: PATH`` is linted only once PATH exists (its lint process writes its pid to
``PATH.pid`` first), so a test decides how long a lint takes; one with a line
``# count: PATH`` adds a line to PATH each time it is linted; and while a workspace
folder holds a file ``hold-programs``, its program facts are not found. ``COMMAND`` runs
the server with it (``python -c COMMAND``)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from xlalint import server_lint, server_program

HOLD = re.compile(r"^# hold: (.+)$", re.MULTILINE)
COUNT = re.compile(r"^# count: (.+)$", re.MULTILINE)
_analyze_document = server_lint.analyze_document

COMMAND = (
    f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
    "import lint_stand_in; lint_stand_in.install(); "
    "from xlalint.server import start; start()"
)


def analyze_document(uri: str, source: str, language_id: str | None = None, program: tuple[str, ...] | None = None):
    held = HOLD.search(source)
    if held is not None:
        gate = Path(held.group(1))
        Path(f"{gate}.pid").write_text(str(os.getpid()))
        while not gate.exists():
            time.sleep(0.02)
    return _analyze_document(uri, source, language_id, program)


_lint = server_lint.lint


def lint(source: str, *args):
    """Every lint of a document (for its diagnostics or its code actions) of this process."""
    counted = COUNT.search(source)
    if counted is not None:
        with open(counted.group(1), "a") as log:
            log.write("linted\n")
    return _lint(source, *args)


# In each process that imports this module: a lint process does when it is given the
# first ``analyze_document`` below, and counts its lints from then on.
server_lint.lint = lint


_xla_program_modules = server_program.xla_program_modules


def xla_program_modules(folder: str, known: dict):
    while (Path(folder) / "hold-programs").exists():
        time.sleep(0.02)
    return _xla_program_modules(folder, known)


def install() -> None:
    """In the server process: its lint processes run this module's ``analyze_document``
    (pickled by reference; they import this module from the same ``sys.path``)."""
    server_lint.analyze_document = analyze_document
    server_program.xla_program_modules = xla_program_modules
