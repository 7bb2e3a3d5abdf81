"""`xlalint server` driven end to end by a real LSP client (pygls') over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import nbformat
from lsprotocol import types
from pygls.lsp.client import LanguageClient
from support import run_cli

from xlalint.server import FIX_ALL, NOTEBOOK_FIX_ALL

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "import torch\n\nmodel = torch.nn.Linear(4, 2).cuda()\nx = torch.ones(2).cuda()  # noqa: XLA104\nname = 'é😀'; y = x.cuda()\n"


class Client(LanguageClient):
    def __init__(self) -> None:
        super().__init__("xlalint-test", "1")
        self.diagnostics: dict[str, asyncio.Queue] = {}

    def queue(self, uri: str) -> asyncio.Queue:
        return self.diagnostics.setdefault(uri, asyncio.Queue())


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """Apply LSP edits (UTF-16 positions) as an editor does, last first."""
    lines = text.splitlines(keepends=True)

    def offset(p: types.Position) -> int:
        before = sum(len(line) for line in lines[: p.line])
        line = lines[p.line] if p.line < len(lines) else ""
        units, chars = 0, 0
        while units < p.character and chars < len(line):
            units += len(line[chars].encode("utf-16-le")) // 2
            chars += 1
        return before + chars

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
        lines = text.splitlines(keepends=True)
    return text


async def session(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.xlalint]\nignore = ["XLA103"]\n')
    sub = tmp_path / "legacy"
    sub.mkdir()
    (sub / "xlalint.toml").write_text('ignore = ["XLA104"]\n')
    train, legacy = tmp_path / "train.py", sub / "old.py"
    train.write_text(SCRIPT)
    legacy.write_text(SCRIPT)

    client = Client()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        client.queue(params.uri).put_nowait(params)

    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    await client.start_io(sys.executable, "-m", "xlalint.cli", "server", env=env, cwd=str(tmp_path))
    result = await client.initialize_async(
        types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=tmp_path.as_uri())
    )
    assert result.server_info is not None and result.server_info.name == "xlalint"
    assert result.capabilities.code_action_provider is not None
    client.initialized(types.InitializedParams())

    async def diagnostics(uri: str) -> list[types.Diagnostic]:
        params = await asyncio.wait_for(client.queue(uri).get(), timeout=60)
        return params.diagnostics

    # open: diagnostics with code, message, range; the noqa line is quiet; UTF-16 columns
    uri = train.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=SCRIPT))
    )
    found = await diagnostics(uri)
    assert [(d.code, d.range.start.line, d.range.start.character, d.source) for d in found] == [
        ("XLA104", 2, 8, "xlalint"),
        ("XLA104", 4, 18, "xlalint"),  # column 17 in characters: the emoji is 2 UTF-16 units
    ]
    assert found[0].range.end == types.Position(2, 36) and ".cuda()" in found[0].message

    # config from the document's path: the nested xlalint.toml ignores XLA104
    legacy_uri = legacy.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(legacy_uri, "python", 1, SCRIPT))
    )
    assert list(await diagnostics(legacy_uri)) == []

    # a quick fix per finding, and fix-all
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri),
            range=found[0].range,
            context=types.CodeActionContext(diagnostics=[found[0]]),
        )
    )
    quick = [a for a in actions if a.kind == types.CodeActionKind.QuickFix]
    assert len(quick) == 1 and quick[0].diagnostics[0].code == "XLA104"
    after_quick = apply(SCRIPT, quick[0].edit.changes[uri])
    assert "model = torch.nn.Linear(4, 2).to(torch_xla.device())\n" in after_quick
    assert "y = x.cuda()" in after_quick and "import torch_xla\n" in after_quick
    fix_all = [a for a in actions if a.kind == FIX_ALL]
    assert len(fix_all) == 1
    fixed = apply(SCRIPT, fix_all[0].edit.changes[uri])
    assert ".cuda()  # noqa" in fixed and fixed.count(".cuda()") == 1 and "y = x.to(torch_xla.device())" in fixed
    only_all = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(uri),
            types.Range(types.Position(0, 0), types.Position(0, 0)),
            types.CodeActionContext(diagnostics=[], only=["source.fixAll"]),
        )
    )
    assert [a.kind for a in only_all] == [FIX_ALL]

    # change (incremental): the fixed text has nothing left to report
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [types.TextDocumentContentChangeWholeDocument(text=fixed)],
        )
    )
    assert list(await diagnostics(uri)) == []

    # save: re-checked (the file on disk has nothing to do with it: the buffer counts)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=3),
            [
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(0, 12), types.Position(0, 12)), text="\nz = x.cuda()"
                )
            ],
        )
    )
    assert [d.range.start.line for d in await diagnostics(uri)] == [1]
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(uri)))
    assert [d.code for d in await diagnostics(uri)] == ["XLA104"]

    # clean shutdown and exit
    await client.shutdown_async(None)
    client.exit(None)
    server = client._server
    assert server is not None
    assert await asyncio.wait_for(server.wait(), timeout=30) == 0
    await client.stop()


def test_language_server_end_to_end(tmp_path):
    asyncio.run(session(tmp_path))


NOTEBOOK_CELLS = (
    (types.NotebookCellKind.Markup, "markdown", "# Fine-tune on a TPU"),
    (types.NotebookCellKind.Code, "python", "!pip install torch_xla\nimport torch"),
    (types.NotebookCellKind.Code, "python", "%%time\nmodel = torch.nn.Linear(4, 2).cuda()\nx = torch.ones(3, 4)"),
    (types.NotebookCellKind.Code, "python", "%%bash\necho x.cuda()"),
    (types.NotebookCellKind.Code, "python", "y = model(x.cuda())  # noqa: XLA104\nz = model(x).cuda()"),
)


async def notebook_session(tmp_path: Path) -> None:
    """A notebook opened as an LSP notebook document: linted as one program (an import
    in cell 2 is seen in cell 3), findings on their cells' URIs with cell-relative
    ranges, fixes that edit several cells, cleared diagnostics on change and close."""
    (tmp_path / "pyproject.toml").write_text('[tool.xlalint]\nignore = ["XLA103"]\n')
    path = tmp_path / "train.ipynb"
    notebook_uri = path.as_uri()
    cell_uris = [f"vscode-notebook-cell:{path}#cell{i}" for i in range(len(NOTEBOOK_CELLS))]
    texts = {uri: text for uri, (_, _, text) in zip(cell_uris, NOTEBOOK_CELLS, strict=True)}

    client = Client()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        client.queue(params.uri).put_nowait(params)

    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    await client.start_io(sys.executable, "-m", "xlalint.cli", "server", env=env, cwd=str(tmp_path))
    capabilities = types.ClientCapabilities(
        notebook_document=types.NotebookDocumentClientCapabilities(
            synchronization=types.NotebookDocumentSyncClientCapabilities()
        )
    )
    result = await client.initialize_async(
        types.InitializeParams(capabilities=capabilities, root_uri=tmp_path.as_uri())
    )
    sync = result.capabilities.notebook_document_sync
    assert sync is not None and sync.save is True
    selector = sync.notebook_selector[0]
    assert selector.notebook == "jupyter-notebook" and [c.language for c in selector.cells] == ["python"]
    assert NOTEBOOK_FIX_ALL in result.capabilities.code_action_provider.code_action_kinds
    client.initialized(types.InitializedParams())

    async def diagnostics(uri: str) -> list[types.Diagnostic]:
        params = await asyncio.wait_for(client.queue(uri).get(), timeout=60)
        return params.diagnostics

    async def published() -> dict[int, list[tuple[str, int, int, int]]]:
        """One round of diagnostics for the code cells: index -> (code, line, start, end)."""
        found = {}
        for index, (kind, _, _) in enumerate(NOTEBOOK_CELLS):
            if kind == types.NotebookCellKind.Code:
                found[index] = [
                    (d.code, d.range.start.line, d.range.start.character, d.range.end.character)
                    for d in await diagnostics(cell_uris[index])
                ]
        return found

    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=notebook_uri,
                notebook_type="jupyter-notebook",
                version=1,
                cells=[types.NotebookCell(kind, uri) for uri, (kind, _, _) in zip(cell_uris, NOTEBOOK_CELLS)],
            ),
            cell_text_documents=[
                types.TextDocumentItem(uri, language, 1, text)
                for uri, (_, language, text) in zip(cell_uris, NOTEBOOK_CELLS)
            ],
        )
    )
    # Cell-relative ranges; the magics are no syntax errors; %%bash is not Python; noqa holds.
    assert await published() == {1: [], 2: [("XLA104", 1, 8, 36)], 3: [], 4: [("XLA104", 1, 4, 19)]}
    # The same findings as `xlalint check` gives for the notebook saved as a file.
    nb = nbformat.v4.new_notebook()
    nb.metadata["language_info"] = {"name": "python"}
    for kind, _, text in NOTEBOOK_CELLS:
        code = kind == types.NotebookCellKind.Code
        nb.cells.append(nbformat.v4.new_code_cell(text) if code else nbformat.v4.new_markdown_cell(text))
    path.write_text(nbformat.writes(nb))
    checked = json.loads(run_cli("check", "--no-cache", "--output-format", "json", path.name, cwd=tmp_path).stdout)
    assert [(f["cell"], f["location"]["row"], f["location"]["column"]) for f in checked] == [(3, 2, 9), (5, 2, 5)]
    assert not client.queue(cell_uris[0]).qsize()  # nothing for the markdown cell

    # A quick fix in cell 3 also adds the import it needs to cell 2, after its imports.
    cell3 = cell_uris[2]
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(cell3),
            range=types.Range(types.Position(1, 8), types.Position(1, 36)),
            context=types.CodeActionContext(diagnostics=[]),
        )
    )
    quick = [a for a in actions if a.kind == types.CodeActionKind.QuickFix]
    assert len(quick) == 1 and quick[0].diagnostics[0].code == "XLA104"
    changes = quick[0].edit.changes
    assert set(changes) == {cell_uris[1], cell3}
    # As `xlalint fix` writes it: the cell ends as it did, without a line break (the
    # blank line the import gets below it is before the next cell, not in this one).
    assert apply(texts[cell_uris[1]], changes[cell_uris[1]]) == "!pip install torch_xla\nimport torch\nimport torch_xla"
    assert apply(texts[cell3], changes[cell3]) == (
        "%%time\nmodel = torch.nn.Linear(4, 2).to(torch_xla.device())\nx = torch.ones(3, 4)"
    )
    assert [a.kind for a in actions if a.kind != types.CodeActionKind.QuickFix] == [FIX_ALL]

    # Fix-all for the notebook (as VS Code asks on save): every cell a fix changes.
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(cell_uris[1]),
            types.Range(types.Position(0, 0), types.Position(0, 0)),
            types.CodeActionContext(diagnostics=[], only=["notebook.source.fixAll"]),
        )
    )
    assert [a.kind for a in actions] == [NOTEBOOK_FIX_ALL]
    fixed = {uri: apply(texts[uri], edits) for uri, edits in actions[0].edit.changes.items()}
    assert set(fixed) == {cell_uris[1], cell3, cell_uris[4]}
    assert fixed[cell_uris[4]] == "y = model(x.cuda())  # noqa: XLA104\nz = model(x).to(torch_xla.device())"

    # Change: the edited cells are linted again with the rest; the fixed notebook is clean.
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(version=2, uri=notebook_uri),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    text_content=[
                        types.NotebookDocumentCellContentChanges(
                            document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                            changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
                        )
                        for uri, text in fixed.items()
                    ]
                )
            ),
        )
    )
    assert await published() == {1: [], 2: [], 3: [], 4: []}

    # The last cell deleted: the others are linted again, the deleted one is cleared.
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(version=3, uri=notebook_uri),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    structure=types.NotebookDocumentCellChangeStructure(
                        array=types.NotebookCellArrayChange(start=4, delete_count=1),
                        did_close=[types.TextDocumentIdentifier(cell_uris[4])],
                    )
                )
            ),
        )
    )
    for uri in cell_uris[1:4]:
        assert list(await diagnostics(uri)) == []
    assert list(await diagnostics(cell_uris[4])) == []  # the removed cell: cleared

    # Save: linted again; close: every cell cleared.
    client.notebook_document_did_save(
        types.DidSaveNotebookDocumentParams(types.NotebookDocumentIdentifier(notebook_uri))
    )
    for uri in cell_uris[1:4]:
        assert list(await diagnostics(uri)) == []
    client.notebook_document_did_close(
        types.DidCloseNotebookDocumentParams(
            types.NotebookDocumentIdentifier(notebook_uri),
            [types.TextDocumentIdentifier(uri) for uri in cell_uris[:4]],
        )
    )
    for uri in cell_uris[:4]:
        assert list(await diagnostics(uri)) == []

    await client.shutdown_async(None)
    client.exit(None)
    server = client._server
    assert server is not None
    assert await asyncio.wait_for(server.wait(), timeout=30) == 0
    await client.stop()


def test_language_server_lints_notebook_documents(tmp_path):
    asyncio.run(notebook_session(tmp_path))


def test_server_without_the_extra_says_how_to_install_it(monkeypatch):
    import importlib.util

    from typer.testing import CliRunner

    from xlalint.cli import app
    from xlalint.install_hint import install_command

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pygls" else real(name, *a))
    result = CliRunner().invoke(app, ["server"])
    assert result.exit_code == 2
    # From this source tree: `pip install -e '<tree>[server]'` (xlalint is not on PyPI).
    assert install_command("server") in result.output and "[server]'" in result.output
