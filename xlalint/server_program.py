"""The program facts of the language server (issue 38): which files of a workspace folder
are local modules of an XLA program.

``xlalint check .`` checks a module that an XLA script imports as part of that program
(``engine/follow.py``: the rules of XLA scripts apply there, ``Settings.xla_program``):
XLA307 reports a growing ``torch.cat`` in the ``generate`` that ``train.py`` imports from
``model.py``. An editor opens ``model.py`` alone; the server finds its importers here, in
a lint process, for each workspace folder: the Python files a walk of the folder checks
(``files.discover``, as ``check .`` walks it), what each imports (``project.local_imports``,
as ``check`` resolves it), and whether it makes an XLA program (it imports torch_xla, or
its port adds the import: ``runner.makes_xla_program``). The modules such a file imports,
transitively, are the program's. What the program's step loops iterate of their functions
(``loader = prepare_dataloader(32)`` in ``train.py``, ``from data import
prepare_dataloader``) is told to them as ``check .`` tells it (``follow.told_by``, joined
by ``follow.program_told``): each member is linted with ``follow.in_program(settings,
iterated)``, and XLA301 reports the loader ``data.py`` builds. Each file's facts are kept
by its size and modification time, so a new computation (the server asks for one when a
file is saved, never per keystroke) reads only what changed.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types

from xlalint.analysis import project
from xlalint.engine import files
from xlalint.engine import source as sourcefile
from xlalint.engine.config import ConfigError, ConfigFinder
from xlalint.engine.file_report import FileReport
from xlalint.engine.follow import in_program, program_told, told_by
from xlalint.engine.lint import lint_source
from xlalint.engine.runner import imports_torch_xla, makes_xla_program
from xlalint.rules import rules_by_code
from xlalint.server_lint import Message

#: Past this many Python files in a folder, its program facts are not computed (a home
#: folder opened as a workspace): its documents are checked alone, as before.
MAX_FILES = 5000
# A file whose port could add torch_xla mentions CUDA (XLA104's fixes add it).
_MAY_PORT = re.compile(r"cuda", re.IGNORECASE)


@dataclass(frozen=True)
class FileFacts:
    """What one file says about its program, as it was at ``size`` and ``mtime_ns``."""

    size: int
    mtime_ns: int
    path: str  # as the walk found it
    imports: tuple[str, ...]  # real paths of the local modules it imports
    xla: bool  # it makes an XLA program
    #: What its step loops tell the local modules it imports (``follow.told_by``: real
    #: path -> function names), by what it is told itself: None as an XLA script, the
    #: names its program's loops iterate as a module of a program. Found when a program
    #: asks (``_tells``), kept with the rest.
    tells: dict[tuple[str, ...] | None, dict[str, tuple[str, ...]]] = field(default_factory=dict)


#: The program facts of a folder: the real path of each file an XLA program of it imports
#: -> the functions of that file whose results the program's step loops iterate (sorted;
#: ``Settings.iterated_by_importers``).
Programs = dict[str, tuple[str, ...]]


def xla_program_modules(
    folder: str, known: dict[str, FileFacts]
) -> tuple[tuple[Programs, dict[str, FileFacts]], list[Message]]:
    """The files of ``folder`` that an XLA program of the folder imports (transitively),
    each with what the program tells it, and each file's facts (``known``: those of the
    last computation, used again for the files that did not change)."""
    messages: list[Message] = []
    finder = ConfigFinder(None, rules_by_code())
    facts: dict[str, FileFacts] = {}
    try:
        for count, path in enumerate(files.discover([Path(folder)], finder)):
            if count >= MAX_FILES:
                text = f"xlalint: over {MAX_FILES} files in {folder}: modules are checked without their importers"
                messages.append(Message(types.MessageType.Warning, text))
                return ({}, {}), messages
            if path.suffix != ".py":
                continue  # a notebook is no module another file imports
            real = os.path.realpath(path)
            found = _facts(path, known.get(real), finder)
            if found is not None:
                facts[real] = found
    except (OSError, ConfigError) as exc:
        messages.append(Message(types.MessageType.Warning, f"xlalint: {folder}: importers not found ({exc})"))
        return ({}, {}), messages
    scripts = [real for real, fact in facts.items() if fact.xla]
    reached: set[str] = set()
    pending = list(scripts)
    while pending:
        for imported in facts[pending.pop()].imports:
            if imported not in reached:
                reached.add(imported)
                if imported in facts:
                    pending.append(imported)
    told = program_told(scripts, reached, lambda real, told: _tells(facts[real], told, finder) if real in facts else {})
    return (told, facts), messages


def _tells(facts: FileFacts, told: tuple[str, ...] | None, finder: ConfigFinder) -> dict[str, tuple[str, ...]]:
    """What the file of ``facts`` tells the modules it imports, as an XLA script (``told``
    None) or as a member of a program told ``told``; read once per change of the file."""
    if told not in facts.tells:
        path = Path(facts.path)
        try:
            text = sourcefile.read(path).text
            settings = finder.for_path(path.absolute())
        except (OSError, sourcefile.SourceError, ConfigError):
            return {}
        if told is not None:
            settings = in_program(settings, told)
        facts.tells[told] = told_by(text, facts.path, settings)
    return facts.tells[told]


def _facts(path: Path, known: FileFacts | None, finder: ConfigFinder) -> FileFacts | None:
    try:
        stat = path.stat()
        if known is not None and (known.size, known.mtime_ns) == (stat.st_size, stat.st_mtime_ns):
            return known
        text = sourcefile.read(path).text
        settings = finder.for_path(path.absolute())
    except (OSError, sourcefile.SourceError, ConfigError):
        return None
    imports = tuple(os.path.realpath(p) for p in project.local_imports(text, str(path), None, settings.root))
    # With `follow-imports = false` its modules are not checked as its program's.
    xla = settings.follow_imports and imports_torch_xla(text)
    if settings.follow_imports and not xla and imports and _MAY_PORT.search(text):
        # A CUDA script that the port makes an XLA one: its modules are the program's
        # too (only a file that imports a local module is asked).
        report = FileReport(str(path), findings=lint_source(text, str(path), settings), source=text)
        xla = makes_xla_program(report)
    return FileFacts(stat.st_size, stat.st_mtime_ns, str(path), imports, xla)
