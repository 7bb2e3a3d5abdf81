"""``xlalint server``: the linter as a language server (LSP over stdio, with pygls).

Diagnostics on open, change and save (``# noqa`` respected, config found from the
document's path as on the command line); a quick fix per fixable finding and a
``source.fixAll.xlalint`` action that applies every safe fix. Unsafe fixes are offered
too when the client's ``initializationOptions`` has ``{"unsafeFixes": true}``.

Notebooks come as LSP 3.17 notebook documents (``notebookDocument/*``; each cell a text
document with its own URI). A notebook is linted as ``xlalint check nb.ipynb`` lints it:
its Python code cells in order, as one module, IPython magics handled as the CLI does;
each finding is published on its cell's URI, with a range within the cell. A fix may
edit several cells (an import goes after the imports in the first cells), so the quick
fixes and fix-all on a cell, and ``notebook.source.fixAll.xlalint``, return edits for
every cell they change.

Positions: our columns count characters; LSP's count UTF-16 code units (its default
encoding), so columns are converted per line.
"""

from __future__ import annotations

import enum
import logging
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument

from xlalint import __version__
from xlalint.linter.config import ConfigError, ConfigFinder, Settings
from xlalint.linter.engine import SYNTAX_ERROR, lint_source
from xlalint.linter.model import Finding, split_lines
from xlalint.linter.notebook import CellText, NotebookError, code_cell, split_module
from xlalint.rules import rules_by_code

FIX_ALL = "source.fixAll.xlalint"
# VS Code asks for this kind on a notebook (`notebook.codeActionsOnSave`); its edits may span cells.
NOTEBOOK_FIX_ALL = "notebook.source.fixAll.xlalint"
SOURCE = "xlalint"
NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(
    notebook_selector=[
        types.NotebookDocumentFilterWithCells(
            notebook="jupyter-notebook", cells=[types.NotebookCellLanguage(language="python")]
        )
    ],
    save=True,
)

log = logging.getLogger(__name__)


class XlalintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "xlalint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=NOTEBOOK_SYNC,
        )
        self.unsafe_fixes = False
        # Notebook URI -> the cell URIs last published, so that cells that left get cleared.
        self.published_cells: dict[str, set[str]] = {}

    def settings(self, uri: str) -> Settings | None:
        """The settings for the document's path (a fresh lookup, so edits to the config
        count at once); None, after telling the user, when the config is broken."""
        path = Path(to_fs_path(uri) or "") if uri.startswith("file:") else Path.cwd() / "untitled.py"
        try:
            settings = ConfigFinder(None, rules_by_code()).for_path(path.absolute())
        except ConfigError as exc:
            self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"xlalint: {exc}"))
            return None
        return None if settings.is_excluded(path) else settings

    def lint(self, source: str, uri: str) -> tuple[list[Finding], Settings | None]:
        settings = self.settings(uri)
        if settings is None:
            return [], None
        path = to_fs_path(uri) if uri.startswith("file:") else None
        try:
            return lint_source(source, path or "<stdin>", settings), settings
        except Exception as exc:  # a bug in a rule: say so, keep serving
            self.window_log_message(types.LogMessageParams(types.MessageType.Error, f"xlalint: {exc!r}"))
            return [], settings

    def findings(self, document: TextDocument) -> list[Finding]:
        if document.uri.endswith(".ipynb"):
            return []  # a notebook's JSON: its cells come as a notebook document
        return self.lint(document.source, document.uri)[0]

    def publish(self, uri: str) -> None:
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:  # a cell is linted with the rest of its notebook
            self.publish_notebook(notebook.uri)
            return
        document = self.workspace.get_text_document(uri)
        lines = split_lines(document.source)
        diagnostics = [diagnostic(f, lines) for f in self.findings(document)]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=document.version, diagnostics=diagnostics)
        )

    def wanted(self, finding: Finding) -> bool:
        return finding.fix is not None and (finding.fix.applicability == "safe" or self.unsafe_fixes)

    # -- notebooks ------------------------------------------------------------------
    def notebook_module(self, notebook: types.NotebookDocument) -> tuple[CellText, dict[int, str]]:
        """The module of the notebook's Python code cells, as ``xlalint check nb.ipynb``
        builds it (cells numbered from the top, markdown included), and cell number -> URI."""
        cells, uris = [], {}
        for number, cell in enumerate(notebook.cells, 1):
            if cell.kind != types.NotebookCellKind.Code:
                continue
            document = self.workspace.get_text_document(cell.document)
            if document.language_id not in (None, "python"):
                continue
            code = code_cell(number, document.source)
            if code is not None:
                cells.append(code)
                uris[number] = cell.document
        return CellText(tuple(cells)), uris

    def publish_notebook(self, notebook_uri: str) -> None:
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None:
            return
        module, uris = self.notebook_module(notebook)
        by_cell: dict[str, list[Finding]] = {}
        for finding in self.lint(module, notebook_uri)[0]:
            located = module.to_cell(finding)
            if located.cell in uris:
                by_cell.setdefault(uris[located.cell], []).append(located)
        cell_uris = [cell.document for cell in notebook.cells if cell.kind == types.NotebookCellKind.Code]
        for uri in cell_uris:
            document = self.workspace.get_text_document(uri)
            lines = split_lines(document.source)
            diagnostics = [diagnostic(f, lines) for f in by_cell.get(uri, [])]
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, version=document.version, diagnostics=diagnostics)
            )
        self.clear(self.published_cells.get(notebook_uri, set()) - set(cell_uris))
        self.published_cells[notebook_uri] = set(cell_uris)

    def clear(self, uris) -> None:
        for uri in sorted(uris):
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def notebook_edits(self, module: CellText, fixed: str, uris: dict[int, str]) -> dict[str, list[types.TextEdit]]:
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


def diagnostic(finding: Finding, lines: list[str]) -> types.Diagnostic:
    s = finding.span
    error = finding.code == SYNTAX_ERROR[0]
    return types.Diagnostic(
        range=types.Range(start=_utf16(lines, s.line, s.col), end=_utf16(lines, s.end_line, s.end_col)),
        message=finding.message,
        severity=types.DiagnosticSeverity.Error if error else types.DiagnosticSeverity.Warning,
        code=finding.code,
        source=SOURCE,
        data={"fixable": finding.fix is not None, "name": finding.name},
    )


def edits(before: str, after: str) -> list[types.TextEdit]:
    """The LSP edits that turn ``before`` into ``after``."""
    from xlalint.fixers.apply import text_edits

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


def create_server() -> XlalintServer:
    server = XlalintServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: XlalintServer, params: types.InitializeParams) -> None:
        options = params.initialization_options
        ls.unsafe_fixes = bool(isinstance(options, dict) and options.get("unsafeFixes"))

    # Open, change and save all mean: lint the document (or the notebook) as it is now.
    def publish_document(ls: XlalintServer, params) -> None:
        ls.publish(params.text_document.uri)

    def publish_notebook(ls: XlalintServer, params) -> None:
        ls.publish_notebook(params.notebook_document.uri)

    for event in (types.TEXT_DOCUMENT_DID_OPEN, types.TEXT_DOCUMENT_DID_CHANGE, types.TEXT_DOCUMENT_DID_SAVE):
        server.feature(event)(publish_document)
    for event in (
        types.NOTEBOOK_DOCUMENT_DID_OPEN,
        types.NOTEBOOK_DOCUMENT_DID_CHANGE,
        types.NOTEBOOK_DOCUMENT_DID_SAVE,
    ):
        server.feature(event)(publish_notebook)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: XlalintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_did_close(ls: XlalintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        closed = {cell.uri for cell in params.cell_text_documents}
        ls.clear(closed | ls.published_cells.pop(params.notebook_document.uri, set()))

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL, NOTEBOOK_FIX_ALL]),
    )
    def code_action(ls: XlalintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        from xlalint.fixers.apply import apply_fixes
        from xlalint.linter.fixing import fix_source

        uri = params.text_document.uri
        notebook = ls.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            return notebook_code_actions(ls, notebook, params)
        document = ls.workspace.get_text_document(uri)
        source = document.source
        findings = [f for f in ls.findings(document) if ls.wanted(f)]
        if not findings:
            return []
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
                actions.append(
                    types.CodeAction(
                        title=f"xlalint ({finding.code}): {finding.fix.message}",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diag],
                        is_preferred=finding.fix.applicability == "safe",
                        edit=types.WorkspaceEdit(changes={uri: edits(source, fixed)}),
                    )
                )
        if want_all:
            settings = ls.settings(uri)
            if settings is not None:
                result = fix_source(source, document.path, settings, unsafe=ls.unsafe_fixes)
                if result.error is None and result.source != source:
                    actions.append(
                        types.CodeAction(
                            title="xlalint: fix all auto-fixable problems",
                            kind=FIX_ALL,
                            edit=types.WorkspaceEdit(changes={uri: edits(source, result.source)}),
                        )
                    )
        return actions

    return server


def _kind(kind) -> str:
    # `str()` of lsprotocol's CodeActionKind members is their Python name, not the kind.
    return kind.value if isinstance(kind, enum.Enum) else str(kind)


def _asked(kind: str, only: list) -> bool:
    """Whether ``kind`` is one of the kinds the client asked for (a kind covers its
    sub-kinds: ``source.fixAll`` asks for ``source.fixAll.xlalint``)."""
    return any(kind == _kind(k) or kind.startswith(f"{_kind(k)}.") for k in only)


def notebook_code_actions(
    ls: XlalintServer, notebook: types.NotebookDocument, params: types.CodeActionParams
) -> list[types.CodeAction]:
    """The code actions on one cell of a notebook: a quick fix per fixable finding in the
    cell's range, and fix-all, each with the edits to every cell it changes."""
    from xlalint.fixers.apply import apply_fixes
    from xlalint.linter.fixing import fix_source

    uri = params.text_document.uri
    module, uris = ls.notebook_module(notebook)
    findings, settings = ls.lint(module, notebook.uri)
    findings = [f for f in findings if ls.wanted(f)]
    if not findings or settings is None:
        return []
    only = params.context.only
    lines = split_lines(ls.workspace.get_text_document(uri).source)
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
            changes = ls.notebook_edits(module, fixed, uris) if used else {}
            if changes:
                actions.append(
                    types.CodeAction(
                        title=f"xlalint ({finding.code}): {finding.fix.message}",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diag],
                        is_preferred=finding.fix.applicability == "safe",
                        edit=types.WorkspaceEdit(changes=changes),
                    )
                )
    # Fix-all on a cell fixes the notebook: the module is one program, and the imports
    # a fix needs go to the first cells. With no kind asked for, one such action is enough.
    kinds = [FIX_ALL] if only is None else [kind for kind in (FIX_ALL, NOTEBOOK_FIX_ALL) if _asked(kind, only)]
    if kinds:
        result = fix_source(module, to_fs_path(notebook.uri) or "<stdin>", settings, unsafe=ls.unsafe_fixes)
        changes = ls.notebook_edits(module, result.source, uris) if result.error is None else {}
        if changes:
            actions += [
                types.CodeAction(
                    title="xlalint: fix all auto-fixable problems",
                    kind=kind,
                    edit=types.WorkspaceEdit(changes=changes),
                )
                for kind in kinds
            ]
    return actions


def start() -> None:
    create_server().start_io()
