"""What the language server's lint process computes: diagnostics and code actions for a
snapshot of a document or a notebook (see ``server.py``).

These run in a child process, not on the server's message loop: ``ast.parse`` of a big
file holds the GIL for seconds, so a thread would still stall the loop. Each function
takes plain snapshots (text, versions, the request's params) and returns its result
with the messages for the user (``Message``), which the server sends: the child never
writes to stdout, the server's channel to the client.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import dataclasses
import enum
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import attrs
from lsprotocol import types
from pygls.protocol import default_converter
from pygls.uris import to_fs_path

from xlalint.engine.collector import collect_less_often
from xlalint.engine.config import ConfigError, ConfigFinder, Settings
from xlalint.engine.fixing import describe, fix_source
from xlalint.engine.follow import in_program
from xlalint.engine.lint import SYNTAX_ERROR, lint_source
from xlalint.engine.notebook import CellText, NotebookError, code_cell, split_module
from xlalint.engine.reporters import AFTER_PORT
from xlalint.engine.source import MAX_BYTES
from xlalint.fixers.apply import apply_fixes, fix_edits, text_edits
from xlalint.fixers.local_edits import local_fix_edits
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
_CONVERTER = default_converter()  # lsprotocol objects to and from LSP's JSON


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


@dataclass(frozen=True)
class DocumentLint:
    """A lint of one version of a text document: the diagnostics published, and the
    findings with a fix, which the server keeps for the code actions on that version
    (they are not linted again). The diagnostics are LSP's JSON (``diagnostic_json``):
    built as lsprotocol objects, thousands of them took longer to send to the server
    and to serialize there (on its message loop) than to find."""

    diagnostics: list[dict]
    fixable: tuple[Finding, ...] = ()
    checked: bool = False  # config found, the file not excluded: fix-all may apply
    #: How safe the fixes of the whole document are (``fixable`` may be some of them).
    applicabilities: frozenset[str] = frozenset()

    def near(self, wanted: types.Range) -> DocumentLint:
        """Only what a code action on the lines of ``wanted`` needs (sent to a lint process)."""
        fixable = tuple(
            f for f in self.fixable if f.span.line - 1 <= wanted.end.line and wanted.start.line <= f.span.end_line - 1
        )
        return DocumentLint([], fixable, self.checked, self.applicabilities)


def serve(connection) -> None:
    """The lint process: run ``(function, args)`` calls from the server, one at a time,
    and send back ``(True, result)`` or ``(False, why)``, until the server goes."""
    os.dup2(2, 1)  # stdout is the server's channel to the client: nothing of ours goes there
    sys.stdout = sys.stderr
    # As the command line does (a spawned process starts with Python's thresholds): with
    # them, the collector took a fifth of a large document's lint, between lints.
    collect_less_often()
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


def settings_for(uri: str, messages: list[Message], program: tuple[str, ...] | None = None) -> Settings | None:
    """The settings for the document's path (a fresh lookup, so edits to the config count
    at once); None, with a message, when the config is broken or excludes the file.
    ``program``: the document is a module of an XLA program (an XLA script of the
    workspace imports it: ``server_program.py``), and these are its functions whose
    results the program's step loops iterate, as ``xlalint check .`` checks it."""
    path = Path(document_path(uri) or Path.cwd() / "untitled.py")
    try:
        settings = ConfigFinder(None, rules_by_code()).for_path(path.absolute())
    except ConfigError as exc:
        messages.append(Message(types.MessageType.Error, f"xlalint: {exc}", show=True))
        return None
    if settings.is_excluded(path):
        return None
    return settings if program is None else in_program(settings, program)


def lint(
    source: str, uri: str, messages: list[Message], program: tuple[str, ...] | None = None
) -> tuple[list[Finding], Settings | None]:
    reason = too_large(source)
    if reason is not None:
        messages.append(Message(types.MessageType.Warning, f"xlalint: {uri} not checked: {reason}"))
        return [], None
    settings = settings_for(uri, messages, program)
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


def analyze_document(
    uri: str, source: str, language_id: str | None = None, program: tuple[str, ...] | None = None
) -> tuple[DocumentLint, list[Message]]:
    """The lint of a text document: its diagnostics (one saying why when it is not
    checked) and its findings with a fix."""
    messages: list[Message] = []
    if is_notebook_json(uri, language_id):
        return DocumentLint([]), messages
    reason = too_large(source)
    if reason is not None:
        messages.append(Message(types.MessageType.Warning, f"xlalint: {uri} not checked: {reason}"))
        return DocumentLint([not_checked_json(reason)]), messages
    lines = split_lines(source)
    findings, settings = lint(source, uri, messages, program)
    diagnostics = [diagnostic_json(f, lines) for f in findings]
    fixable = tuple(f for f in findings if f.fix is not None)
    applicabilities = frozenset(f.fix.applicability for f in fixable if f.fix is not None)
    return DocumentLint(diagnostics, fixable, settings is not None, applicabilities), messages


def lint_document(
    uri: str, source: str, language_id: str | None = None, program: tuple[str, ...] | None = None
) -> tuple[list[types.Diagnostic], list[Message]]:
    """The diagnostics of a text document (lsprotocol objects); one saying why when it
    is not checked."""
    linted, messages = analyze_document(uri, source, language_id, program)
    return [_CONVERTER.structure(d, types.Diagnostic) for d in linted.diagnostics], messages


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
    return types.Position(*_utf16_json(lines, line, col))


def _utf16_json(lines: list[str], line: int, col: int) -> tuple[int, int]:
    """``_utf16`` as (line, character): thousands of diagnostics need no lsprotocol objects."""
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    prefix = text[:col]
    # An ASCII prefix is one UTF-16 code unit a character (most code): not encoded.
    return max(line - 1, 0), len(prefix) if prefix.isascii() else len(prefix.encode("utf-16-le")) // 2


def diagnostic_message(finding: Finding) -> str:
    """The message as the CLI prints it, ending ` (after the port)` for a finding that
    follows from the port; a notebook cell's starts with `cell N: `, the cell counted as
    the CLI counts it, since VS Code's Problems panel shows only a line within the cell."""
    cell = f"cell {finding.cell}: " if finding.cell is not None else ""
    return f"{cell}{finding.message}{AFTER_PORT if finding.after_port else ''}"


def diagnostic_json(finding: Finding, lines: list[str]) -> dict:
    """``diagnostic`` as LSP's JSON."""
    s = finding.span
    line, character = _utf16_json(lines, s.line, s.col)
    end_line, end_character = _utf16_json(lines, s.end_line, s.end_col)
    return {
        "range": {
            "start": {"line": line, "character": character},
            "end": {"line": end_line, "character": end_character},
        },
        "message": diagnostic_message(finding),
        "severity": 1 if finding.code == SYNTAX_ERROR[0] else 2,  # Error, Warning
        "code": finding.code,
        "source": SOURCE,
        "data": {"fixable": finding.fix is not None, "name": finding.name},
    }


def not_checked_json(reason: str) -> dict:
    """``not_checked`` as LSP's JSON."""
    return _CONVERTER.unstructure(not_checked(reason))


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
    return [_lsp_edit(e, lines) for e in text_edits(before, after)]


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
    uri: str,
    source: str,
    language_id: str | None,
    params: types.CodeActionParams,
    unsafe: bool,
    linted: DocumentLint | None = None,
    resolve: bool = False,
    program: tuple[str, ...] | None = None,
) -> tuple[list[types.CodeAction], list[Message]]:
    """The code actions on a text document: a quick fix per fixable finding in the
    range, and fix-all. ``linted``: the lint of this version of the document, when the
    server has it (else it is linted here). ``resolve``: the client resolves code
    actions (``codeAction/resolve``): fix-all comes without its edit, which
    :func:`resolve_code_action` computes when the client asks for it (fixing the whole
    file takes seconds on a large one), and so does a quick fix whose edit cannot be
    found from the statements it touches. A quick fix's edit is found from those
    statements (``fixers/local_edits.py``), not from the whole file."""
    messages: list[Message] = []
    if is_notebook_json(uri, language_id):
        return [], messages
    if linted is None:
        linted, messages = analyze_document(uri, source, language_id, program)
    findings = [f for f in linted.fixable if _wanted(f, unsafe)]
    if not ((unsafe and linted.applicabilities) or "safe" in linted.applicabilities):
        return [], messages  # nothing in the document to fix
    only = params.context.only
    want_quick = only is None or any(_kind(k).startswith("quickfix") for k in only)
    want_all = only is None or any(FIX_ALL.startswith(_kind(k)) for k in only)
    actions: list[types.CodeAction] = []
    if want_quick:
        wanted = params.range
        near = [f for f in findings if f.span.line - 1 <= wanted.end.line and wanted.start.line <= f.span.end_line - 1]
        lines = split_lines(source) if near else []
        tree: ast.Module | bool | None = None  # False: it does not parse here (a BOM)
        for finding in near:
            diag = diagnostic(finding, lines)
            if not _overlaps(diag, wanted):
                continue
            assert finding.fix is not None
            if tree is None:
                tree = _parsed(source)
            found = local_fix_edits(source, tree, finding.fix) if tree else None
            if found is None and resolve:
                actions.append(_quick_fix(finding, diag, None, _resolve_data(uri, finding)))
                continue
            found = fix_edits(source, finding.fix) if found is None else found
            if found:
                actions.append(_quick_fix(finding, diag, {uri: [_lsp_edit(e, lines) for e in found]}))
    if want_all and linted.checked:
        if resolve:
            actions.append(_fix_all(FIX_ALL, None, {"uri": uri, "fix": "all"}))
        else:
            changes = _fix_all_changes(uri, source, unsafe, messages, program)
            if changes:
                actions.append(_fix_all(FIX_ALL, changes))
    return actions, messages


def _parsed(source: str) -> ast.Module | bool:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False


def resolve_code_action(
    uri: str,
    source: str,
    action: types.CodeAction,
    unsafe: bool,
    linted: DocumentLint | None = None,
    program: tuple[str, ...] | None = None,
) -> tuple[types.CodeAction, list[Message]]:
    """The code action with its edit, for ``codeAction/resolve``: fix-all, or a quick fix
    whose edit needed the whole file (``document_code_actions``), on the document as it
    is now. An action whose finding is gone comes back without an edit."""
    messages: list[Message] = []
    data = action.data if isinstance(action.data, dict) else {}
    if data.get("fix") == "all":
        changes = _fix_all_changes(uri, source, unsafe, messages, program)
        return attrs.evolve(action, edit=types.WorkspaceEdit(changes=changes)), messages
    wanted = data.get("fix")
    if linted is None:
        linted, messages = analyze_document(uri, source, "python", program)
    for finding in linted.fixable:
        if [finding.code, *dataclasses.astuple(finding.span)] == wanted and finding.fix is not None:
            lines = split_lines(source)
            edits = [_lsp_edit(e, lines) for e in fix_edits(source, finding.fix)]
            return attrs.evolve(action, edit=types.WorkspaceEdit(changes={uri: edits})), messages
    return action, messages


def _resolve_data(uri: str, finding: Finding) -> dict:
    """What ``codeAction/resolve`` gets back to find the finding again."""
    return {"uri": uri, "fix": [finding.code, *dataclasses.astuple(finding.span)]}


def _fix_all_changes(
    uri: str, source: str, unsafe: bool, messages: list[Message], program: tuple[str, ...] | None
) -> dict[str, list[types.TextEdit]]:
    settings = settings_for(uri, messages, program)
    if settings is None:
        return {}
    result = fix_source(source, document_path(uri) or "<stdin>", settings, unsafe=unsafe)
    if result.error is not None or result.source == source:
        return {}
    return {uri: edits(source, result.source)}


def _lsp_edit(edit, lines: list[str]) -> types.TextEdit:
    """A text edit (1-based rows and columns, in characters) as an LSP edit."""
    start = _utf16(lines, edit.start[0], edit.start[1] - 1)
    end = _utf16(lines, edit.end[0], edit.end[1] - 1)
    return types.TextEdit(range=types.Range(start=start, end=end), new_text=edit.content)


def notebook_code_actions(
    notebook_uri: str,
    cells: list[CellSnapshot],
    cell_source: str,
    params: types.CodeActionParams,
    unsafe: bool,
    resolve: bool = False,
) -> tuple[list[types.CodeAction], list[Message]]:
    """The code actions on one cell of a notebook: a quick fix per fixable finding in the
    cell's range, and fix-all, each with the edits to every cell it changes (fix-all's
    computed on ``codeAction/resolve`` when the client resolves: ``resolve``)."""
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
    if kinds and resolve:
        data = {"uri": uri, "notebook": notebook_uri, "fix": "all"}
        actions += [_fix_all(kind, None, data) for kind in kinds]
    elif kinds:
        changes = _notebook_fix_all_changes(notebook_uri, module, uris, settings, unsafe)
        if changes:
            actions += [_fix_all(kind, changes) for kind in kinds]
    return actions, messages


def resolve_notebook_code_action(
    notebook_uri: str, cells: list[CellSnapshot], action: types.CodeAction, unsafe: bool
) -> tuple[types.CodeAction, list[Message]]:
    """Fix-all on a notebook with its edits to every cell it changes, for ``codeAction/resolve``."""
    messages: list[Message] = []
    module, uris = notebook_module(cells)
    settings = settings_for(notebook_uri, messages) if too_large(module) is None else None
    changes = _notebook_fix_all_changes(notebook_uri, module, uris, settings, unsafe) if settings is not None else {}
    return attrs.evolve(action, edit=types.WorkspaceEdit(changes=changes)), messages


def _notebook_fix_all_changes(
    notebook_uri: str, module: CellText, uris: dict[int, str], settings: Settings, unsafe: bool
) -> dict[str, list[types.TextEdit]]:
    result = fix_source(module, to_fs_path(notebook_uri) or "<stdin>", settings, unsafe=unsafe)
    return notebook_edits(module, result.source, uris) if result.error is None else {}


def _quick_fix(
    finding: Finding,
    diag: types.Diagnostic,
    changes: dict[str, list[types.TextEdit]] | None,
    data: dict | None = None,
) -> types.CodeAction:
    """The quick fix of one finding (preferred when its fix is safe); without its edit
    (``changes`` None) it carries ``data`` for ``codeAction/resolve``."""
    assert finding.fix is not None
    return types.CodeAction(
        title=f"xlalint ({finding.code}): {finding.fix.message}",
        kind=types.CodeActionKind.QuickFix,
        diagnostics=[diag],
        is_preferred=finding.fix.applicability == "safe",
        edit=None if changes is None else types.WorkspaceEdit(changes=changes),
        data=data,
    )


def _fix_all(kind: str, changes: dict[str, list[types.TextEdit]] | None, data: dict | None = None) -> types.CodeAction:
    return types.CodeAction(
        title="xlalint: fix all auto-fixable problems",
        kind=kind,
        edit=None if changes is None else types.WorkspaceEdit(changes=changes),
        data=data,
    )
