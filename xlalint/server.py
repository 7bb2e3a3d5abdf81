"""``xlalint server``: the linter as a language server (LSP over stdio, with pygls).

Diagnostics on open, change and save (``# noqa`` respected, config found from the
document's path as on the command line); a quick fix per fixable finding and a
``source.fixAll.xlalint`` action that applies every safe fix. Unsafe fixes are offered
too when the client's ``initializationOptions`` has ``{"unsafeFixes": true}``.

Positions: our columns count characters; LSP's count UTF-16 code units (its default
encoding), so columns are converted per line.
"""

from __future__ import annotations

import logging
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument

from xlalint import __version__
from xlalint.linter.config import ConfigError, ConfigFinder, Settings
from xlalint.linter.engine import SYNTAX_ERROR, lint_source
from xlalint.linter.model import Finding, split_lines

FIX_ALL = "source.fixAll.xlalint"
SOURCE = "xlalint"

log = logging.getLogger(__name__)


class XlalintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("xlalint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.unsafe_fixes = False

    def settings(self, document: TextDocument) -> Settings | None:
        """The settings for the document's path (a fresh lookup, so edits to the config
        count at once); None, after telling the user, when the config is broken."""
        path = Path(document.path) if document.uri.startswith("file:") else Path.cwd() / "untitled.py"
        try:
            settings = ConfigFinder(None).for_path(path.absolute())
        except ConfigError as exc:
            self.window_show_message(types.ShowMessageParams(types.MessageType.Error, f"xlalint: {exc}"))
            return None
        return None if settings.is_excluded(path) else settings

    def findings(self, document: TextDocument) -> list[Finding]:
        if document.uri.endswith(".ipynb"):
            return []  # a notebook's cells come as notebook documents, which this server does not take
        settings = self.settings(document)
        if settings is None:
            return []
        try:
            return lint_source(document.source, document.path, settings)
        except Exception as exc:  # a bug in a rule: say so, keep serving
            self.window_log_message(types.LogMessageParams(types.MessageType.Error, f"xlalint: {exc!r}"))
            return []

    def publish(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        lines = split_lines(document.source)
        diagnostics = [diagnostic(f, lines) for f in self.findings(document)]
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=document.version, diagnostics=diagnostics)
        )

    def wanted(self, finding: Finding) -> bool:
        return finding.fix is not None and (finding.fix.applicability == "safe" or self.unsafe_fixes)


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

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: XlalintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: XlalintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: XlalintServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.publish(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: XlalintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[])
        )

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL]),
    )
    def code_action(ls: XlalintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        from xlalint.fixers.apply import apply_fixes
        from xlalint.linter.fixing import fix_source

        uri = params.text_document.uri
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
            settings = ls.settings(document)
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


def start() -> None:
    create_server().start_io()
