"""What the language server's lint process computes: diagnostics and code actions for a
snapshot of a document or a notebook (see ``server.py``).

These run in a child process, not on the server's message loop: ``ast.parse`` of a big
file holds the GIL for seconds, so a thread would still stall the loop. Each function
takes plain snapshots (text, versions, the request's params) and returns its result
with the messages for the user (``Message``), which the server sends: the child never
writes to stdout, the server's channel to the client.
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types
from pygls.uris import to_fs_path

from xlalint.engine.config import ConfigError, ConfigFinder, Settings
from xlalint.engine.fixing import describe, fix_source
from xlalint.engine.lint import SYNTAX_ERROR, lint_source
from xlalint.engine.notebook import CellText, NotebookError, code_cell, split_module
from xlalint.engine.reporters import AFTER_PORT
from xlalint.engine.source import MAX_BYTES
from xlalint.fixers.apply import apply_fixes, text_edits
from xlalint.model import Finding, split_lines
from xlalint.rules import rules_by_code

FIX_ALL = "source.fixAll.xlalint"
# VS Code asks for this kind on a notebook (`notebook.codeActionsOnSave`); its edits may span cells.
NOTEBOOK_FIX_ALL = "notebook.source.fixAll.xlalint"
SOURCE = "xlalint"
#: jupyter-lsp's folder of virtual documents (its default ``virtual_documents_dir``):
#: jupyterlab-lsp opens a notebook's code cells, joined into one Python module with the
#: magics turned into Python, as the text document ``<root>/.virtual_documents/<notebook
#: path>`` with the language ``python``.
VIRTUAL_DOCUMENTS = ".virtual_documents"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@dataclass(frozen=True)
class Message:
    """A message for the user, sent by the server (``show``: a pop-up, else the log)."""

    kind: types.MessageType
    text: str
    show: bool = False


@dataclass(frozen=True)
class CellSnapshot:
    """A notebook's code cell as it was when a lint was asked for."""

    number: int  # 1-based, every cell counted
    uri: str
    version: int | None
    source: str
    python: bool  # in Python (else its diagnostics are only cleared)


def serve(connection) -> None:
    """The lint process: run ``(function, args)`` calls from the server, one at a time,
    and send back ``(True, result)`` or ``(False, why)``, until the server goes."""
    os.dup2(2, 1)  # stdout is the server's channel to the client: nothing of ours goes there
    sys.stdout = sys.stderr
    if sys.platform.startswith("linux"):  # die with the server, even if it is SIGKILLed
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    while True:
        try:
            function, args = connection.recv()
        except (EOFError, OSError):
            return
        try:
            reply = (True, function(*args))
        except Exception as exc:  # a bug in a rule or a fix: the server answers with an error
            reply = (False, describe(exc))
        connection.send(reply)


def too_large(source: str) -> str | None:
    """Why a document is not linted: over the CLI's size limit; None if it is within."""
    if len(source) * 4 <= MAX_BYTES:  # no character takes more than four bytes
        return None
    size = len(source.encode("utf-8", "surrogatepass"))
    if size <= MAX_BYTES:
        return None
    return f"file is too large to check ({size / 2**20:.1f} MiB; the limit is {MAX_BYTES // 2**20} MiB)"


def document_path(uri: str) -> str | None:
    """The file a document stands for: its own path, or for jupyterlab-lsp's virtual
    document of a notebook the notebook's (so that the config, ``exclude`` and
    ``per-file-ignores`` apply as to the notebook); None when it is not a file."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if not path:
        return None
    parts = Path(path).parts
    if VIRTUAL_DOCUMENTS in parts[:-1]:  # the first: the folder is right under the server's root
        at = parts.index(VIRTUAL_DOCUMENTS)
        return str(Path(*parts[:at], *parts[at + 1 :]))
    return path


def is_notebook_json(uri: str, language_id: str | None) -> bool:
    """Whether a text document is a notebook's JSON (its cells come as a notebook
    document), not the notebook's Python code as jupyterlab-lsp sends it."""
    return uri.endswith(".ipynb") and language_id != "python"


def settings_for(uri: str, messages: list[Message]) -> Settings | None:
    """The settings for the document's path (a fresh lookup, so edits to the config count
    at once); None, with a message, when the config is broken or excludes the file."""
    path = Path(document_path(uri) or Path.cwd() / "untitled.py")
    try:
        settings = ConfigFinder(None, rules_by_code()).for_path(path.absolute())
    except ConfigError as exc:
        messages.append(Message(types.MessageType.Error, f"xlalint: {exc}", show=True))
        return None
    return None if settings.is_excluded(path) else settings


def lint(source: str, uri: str, messages: list[Message]) -> tuple[list[Finding], Settings | None]:
    reason = too_large(source)
    if reason is not None:
        messages.append(Message(types.MessageType.Warning, f"xlalint: {uri} not checked: {reason}"))
        return [], None
    settings = settings_for(uri, messages)
    if settings is None:
        return [], None
    try:
        return lint_source(source, document_path(uri) or "<stdin>", settings), settings
    except Exception as exc:  # a bug in a rule: say so, keep serving
        messages.append(Message(types.MessageType.Error, f"xlalint: {exc!r}"))
        return [], settings


def not_checked(reason: str) -> types.Diagnostic:
    """The diagnostic, at the start, of a document (or notebook) that was not checked."""
    start = types.Position(0, 0)
    return types.Diagnostic(
        range=types.Range(start, start),
        message=f"xlalint: not checked: {reason}",
        severity=types.DiagnosticSeverity.Information,
        source=SOURCE,
    )


def lint_document(
    uri: str, source: str, language_id: str | None = None
) -> tuple[list[types.Diagnostic], list[Message]]:
    """The diagnostics of a text document; one saying why when it is not checked."""
    messages: list[Message] = []
    if is_notebook_json(uri, language_id):
        return [], messages
    reason = too_large(source)
    if reason is not None:
        messages.append(Message(types.MessageType.Warning, f"xlalint: {uri} not checked: {reason}"))
        return [not_checked(reason)], messages
    lines = split_lines(source)
    return [diagnostic(f, lines) for f in lint(source, uri, messages)[0]], messages


def lint_notebook(
    notebook_uri: str, cells: list[CellSnapshot]
) -> tuple[list[tuple[CellSnapshot, list[types.Diagnostic]]], list[Message]]:
    """The diagnostics of each code cell of a notebook, linted as one module."""
    messages: list[Message] = []
    module, uris = notebook_module(cells)
    reason = too_large(module)
    if reason is not None:  # said on the first code cell, as on a text document's first line
        messages.append(Message(types.MessageType.Warning, f"xlalint: {notebook_uri} not checked: {reason}"))
        first = next((cell.uri for cell in cells if cell.number in uris), None)
        return [(cell, [not_checked(reason)] if cell.uri == first else []) for cell in cells], messages
    by_cell: dict[str, list[Finding]] = {}
    for finding in lint(module, notebook_uri, messages)[0]:
        located = module.to_cell(finding)
        if located.cell in uris:
            by_cell.setdefault(uris[located.cell], []).append(located)
    published = []
    for cell in cells:
        lines = split_lines(cell.source)
        published.append((cell, [diagnostic(f, lines) for f in by_cell.get(cell.uri, [])]))
    return published, messages


def notebook_module(cells: list[CellSnapshot]) -> tuple[CellText, dict[int, str]]:
    """The module of the notebook's Python code cells, as ``xlalint check nb.ipynb``
    builds it (cells numbered from the top, markdown included), and cell number -> URI."""
    codes, uris = [], {}
    for cell in cells:
        code = code_cell(cell.number, cell.source) if cell.python else None
        if code is not None:
            codes.append(code)
            uris[cell.number] = cell.uri
    return CellText(tuple(codes)), uris


def notebook_edits(module: CellText, fixed: str, uris: dict[int, str]) -> dict[str, list[types.TextEdit]]:
    """The edits, per cell URI, that turn the notebook's cells into those of ``fixed``;
    {} when the fix would move code between cells or touch a magic line."""
    try:
        cells = split_module(fixed, module.cells)
    except NotebookError:
        return {}
    before = module.cell_texts()
    return {uris[c.number]: edits(before[c.number], c.text) for c in cells if c.text != before[c.number]}


def _utf16(lines: list[str], line: int, col: int) -> types.Position:
    """A 1-based line and 0-based character column as an LSP position."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    prefix = text[:col]
    return types.Position(line=max(line - 1, 0), character=len(prefix.encode("utf-16-le")) // 2)


def diagnostic_message(finding: Finding) -> str:
    """The message as the CLI prints it, ending ` (after the port)` for a finding that
    follows from the port; a notebook cell's starts with `cell N: `, the cell counted as
    the CLI counts it, since VS Code's Problems panel shows only a line within the cell."""
    cell = f"cell {finding.cell}: " if finding.cell is not None else ""
    return f"{cell}{finding.message}{AFTER_PORT if finding.after_port else ''}"


def diagnostic(finding: Finding, lines: list[str]) -> types.Diagnostic:
    s = finding.span
    error = finding.code == SYNTAX_ERROR[0]
    return types.Diagnostic(
        range=types.Range(start=_utf16(lines, s.line, s.col), end=_utf16(lines, s.end_line, s.end_col)),
        message=diagnostic_message(finding),
        severity=types.DiagnosticSeverity.Error if error else types.DiagnosticSeverity.Warning,
        code=finding.code,
        source=SOURCE,
        data={"fixable": finding.fix is not None, "name": finding.name},
    )


def edits(before: str, after: str) -> list[types.TextEdit]:
    """The LSP edits that turn ``before`` into ``after``."""
    lines = split_lines(before)
    return [
        types.TextEdit(
            range=types.Range(
                start=_utf16(lines, e.start[0], e.start[1] - 1),
                end=_utf16(lines, e.end[0], e.end[1] - 1),
            ),
            new_text=e.content,
        )
        for e in text_edits(before, after)
    ]


def _overlaps(diag: types.Diagnostic, wanted: types.Range) -> bool:
    def key(p: types.Position) -> tuple[int, int]:
        return (p.line, p.character)

    return key(diag.range.start) <= key(wanted.end) and key(wanted.start) <= key(diag.range.end)


def _wanted(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (finding.fix.applicability == "safe" or unsafe)


def _kind(kind) -> str:
    # `str()` of lsprotocol's CodeActionKind members is their Python name, not the kind.
    return kind.value if isinstance(kind, enum.Enum) else str(kind)


def _asked(kind: str, only: list) -> bool:
    """Whether ``kind`` is one of the kinds the client asked for (a kind covers its
    sub-kinds: ``source.fixAll`` asks for ``source.fixAll.xlalint``)."""
    return any(kind == _kind(k) or kind.startswith(f"{_kind(k)}.") for k in only)


def document_code_actions(
    uri: str, source: str, language_id: str | None, params: types.CodeActionParams, unsafe: bool
) -> tuple[list[types.CodeAction], list[Message]]:
    """The code actions on a text document: a quick fix per fixable finding in the
    range, and fix-all."""
    messages: list[Message] = []
    if is_notebook_json(uri, language_id):
        return [], messages
    findings = [f for f in lint(source, uri, messages)[0] if _wanted(f, unsafe)]
    if not findings:
        return [], messages
    only = params.context.only
    want_quick = only is None or any(str(k).startswith("quickfix") for k in only)
    want_all = only is None or any(FIX_ALL.startswith(str(k)) for k in only)
    lines = split_lines(source)
    actions: list[types.CodeAction] = []
    if want_quick:
        for finding in findings:
            diag = diagnostic(finding, lines)
            if not _overlaps(diag, params.range):
                continue
            assert finding.fix is not None
            fixed, used = apply_fixes(source, [finding.fix])
            if not used or fixed == source:
                continue
            actions.append(_quick_fix(finding, diag, {uri: edits(source, fixed)}))
    settings = settings_for(uri, messages) if want_all else None
    if settings is not None:
        result = fix_source(source, document_path(uri) or "<stdin>", settings, unsafe=unsafe)
        if result.error is None and result.source != source:
            actions.append(_fix_all(FIX_ALL, {uri: edits(source, result.source)}))
    return actions, messages


def notebook_code_actions(
    notebook_uri: str, cells: list[CellSnapshot], cell_source: str, params: types.CodeActionParams, unsafe: bool
) -> tuple[list[types.CodeAction], list[Message]]:
    """The code actions on one cell of a notebook: a quick fix per fixable finding in the
    cell's range, and fix-all, each with the edits to every cell it changes."""
    messages: list[Message] = []
    uri = params.text_document.uri
    module, uris = notebook_module(cells)
    findings, settings = lint(module, notebook_uri, messages)
    findings = [f for f in findings if _wanted(f, unsafe)]
    if not findings or settings is None:
        return [], messages
    only = params.context.only
    lines = split_lines(cell_source)
    actions: list[types.CodeAction] = []
    if only is None or any(_kind(k).startswith("quickfix") for k in only):
        for finding in findings:
            located = module.to_cell(finding)
            if uris.get(located.cell) != uri:
                continue
            diag = diagnostic(located, lines)
            if not _overlaps(diag, params.range):
                continue
            assert finding.fix is not None
            fixed, used = apply_fixes(module, [finding.fix])
            changes = notebook_edits(module, fixed, uris) if used else {}
            if changes:
                actions.append(_quick_fix(finding, diag, changes))
    # Fix-all on a cell fixes the notebook: the module is one program, and the imports
    # a fix needs go to the first cells. With no kind asked for, one such action is enough.
    kinds = [FIX_ALL] if only is None else [kind for kind in (FIX_ALL, NOTEBOOK_FIX_ALL) if _asked(kind, only)]
    if kinds:
        result = fix_source(module, to_fs_path(notebook_uri) or "<stdin>", settings, unsafe=unsafe)
        changes = notebook_edits(module, result.source, uris) if result.error is None else {}
        if changes:
            actions += [_fix_all(kind, changes) for kind in kinds]
    return actions, messages


def _quick_fix(finding: Finding, diag: types.Diagnostic, changes: dict[str, list[types.TextEdit]]) -> types.CodeAction:
    """The quick fix of one finding (preferred when its fix is safe)."""
    assert finding.fix is not None
    return types.CodeAction(
        title=f"xlalint ({finding.code}): {finding.fix.message}",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diag],
        is_preferred=finding.fix.applicability == "safe",
        edit=types.WorkspaceEdit(changes=changes),
    )


def _fix_all(kind: str, changes: dict[str, list[types.TextEdit]]) -> types.CodeAction:
    return types.CodeAction(
        title="xlalint: fix all auto-fixable problems", kind=kind, edit=types.WorkspaceEdit(changes=changes)
    )
