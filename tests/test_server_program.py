"""`xlalint server` checks a module as a part of its program (issue 38), told what the
program's step loops iterate of it, and answers code actions at once with fix-all
resolved later (issue 39), driven by pygls' client."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from lint_stand_in import COMMAND
from lsprotocol import types
from test_server import ROOT, Client, apply

from xlalint import server_program
from xlalint.server import FIX_ALL

HELPER = Path(__file__).parent / "fixtures" / "XLA301" / "helper_module"
DATA = (HELPER / "data.py").read_text()
TRAIN = (HELPER / "train.py").read_text()

GENERATE_MODULE = """\
import torch


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(4, 4)

    def generate(self, idx, steps):
        for _ in range(steps):
            logits = self.head(idx.float())
            idx = torch.cat((idx, logits.argmax(-1)[:, -1:]), dim=1)
        return idx
"""
XLA_TRAINER = """\
import torch
import torch_xla

from model import TinyLM

device = torch_xla.device()
model = TinyLM().to(device)
print(model.generate(torch.zeros((1, 4), dtype=torch.long, device=device), 4))
"""
CPU_TRAINER = XLA_TRAINER.replace("import torch_xla\n", "").replace("torch_xla.device()", '"cpu"')


SERVER = ("-m", "xlalint.cli", "server")


async def started(
    tmp_path: Path, capabilities: types.ClientCapabilities | None = None, command: tuple[str, ...] = SERVER
) -> Client:
    client = Client()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        client.queue(params.uri).put_nowait(params)

    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    await client.start_io(sys.executable, *command, env=env, cwd=str(tmp_path))
    workspace = [types.WorkspaceFolder(uri=tmp_path.as_uri(), name="project")]
    result = await client.initialize_async(
        types.InitializeParams(
            capabilities=capabilities or types.ClientCapabilities(),
            root_uri=tmp_path.as_uri(),
            workspace_folders=workspace,
        )
    )
    assert result.capabilities.code_action_provider.resolve_provider is True
    client.initialized(types.InitializedParams())
    return client


async def stopped(client: Client) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    assert await asyncio.wait_for(client._server.wait(), timeout=30) == 0
    await client.stop()


async def codes(client: Client, uri: str) -> list[str]:
    params = await asyncio.wait_for(client.queue(uri).get(), timeout=60)
    return [d.code for d in params.diagnostics]


def open_file(client: Client, path: Path) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, path.read_text()))
    )
    return uri


async def program_session(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(GENERATE_MODULE)
    (tmp_path / "train.py").write_text(XLA_TRAINER)
    client = await started(tmp_path)
    model = open_file(client, tmp_path / "model.py")
    # model.py alone has nothing to report; imported by the XLA script train.py, it is
    # a part of an XLA program, as `xlalint check .` checks it (if the program took
    # longer than the server waits for it, model.py was published alone first).
    while (found := await codes(client, model)) == []:
        pass
    assert found == ["XLA307"]
    # train.py no longer an XLA script, saved: model.py is checked again, alone.
    (tmp_path / "train.py").write_text(CPU_TRAINER)
    train = open_file(client, tmp_path / "train.py")
    assert "XLA307" not in await codes(client, train)
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(train)))
    await codes(client, train)  # the saved document, linted again
    assert await codes(client, model) == []
    await stopped(client)


def test_a_module_imported_by_an_xla_script_is_checked_as_a_part_of_its_program(tmp_path):
    asyncio.run(program_session(tmp_path))


async def told_session(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "data.py").write_text(DATA)
    (tmp_path / "train.py").write_text(TRAIN)
    client = await started(tmp_path)
    data = open_file(client, tmp_path / "data.py")
    # train.py's step loop iterates what prepare_dataloader returns: its DataLoader is a
    # training loader, as `xlalint check .` reports it (published alone first if the
    # program took longer than the server waits for it).
    while (found := await codes(client, data)) == []:
        pass
    assert found == ["XLA301"]
    # The loop no longer iterates it, saved: data.py is checked again, told nothing.
    (tmp_path / "train.py").write_text(TRAIN.replace("loader = prepare_dataloader(32)", "loader = [(x, x)]"))
    train = open_file(client, tmp_path / "train.py")
    client.text_document_did_save(types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(train)))
    await codes(client, train)
    assert await codes(client, data) == []
    await stopped(client)


def test_a_module_is_told_what_its_importers_step_loops_iterate(tmp_path):
    asyncio.run(told_session(tmp_path))


def programs(folder: Path, known: dict | None = None) -> tuple[dict, dict]:
    (found, facts), messages = server_program.xla_program_modules(str(folder), known or {})
    assert messages == []
    return {os.path.relpath(real, folder): names for real, names in found.items()}, facts


def test_the_folder_index_tells_each_module_what_the_program_iterates(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "data.py").write_text(DATA)
    (tmp_path / "train.py").write_text(TRAIN)
    # A CPU script's step loop tells nothing: its program is no XLA one.
    (tmp_path / "other.py").write_text(
        "import torch\nimport data\n\nopt = torch.optim.SGD([], lr=0.1)\n"
        "for x, y in data.prepare_eval_loader(1):\n    x.sum().backward()\n    opt.step()\n"
    )
    assert programs(tmp_path)[0] == {"data.py": ("prepare_dataloader",)}
    # The script no longer iterates it: part of the XLA program, told nothing.
    (tmp_path / "train.py").write_text(TRAIN.replace("in loader:", "in []:"))
    assert programs(tmp_path)[0] == {"data.py": ()}
    # No XLA script imports it: not part of a program.
    (tmp_path / "train.py").unlink()
    assert programs(tmp_path)[0] == {}


def test_a_told_module_tells_on_and_unchanged_files_are_not_read_again(tmp_path, monkeypatch):
    """`prepare_dataloader` returns what `loaders.make_loader` builds: `data.py`, told by
    `train.py`, tells `loaders.py` in turn; `check .` reports the loader there too."""
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "loaders.py").write_text(
        "from torch.utils.data import DataLoader\n\n\n"
        "def make_loader(ds, bs):\n"
        "    return DataLoader(ds, batch_size=bs, shuffle=True)\n"
    )
    (tmp_path / "data.py").write_text(
        "import torch\nfrom torch.utils.data import TensorDataset\nfrom loaders import make_loader\n\n\n"
        "def prepare_dataloader(batch_size):\n"
        "    return make_loader(TensorDataset(torch.randn(100, 4)), batch_size)\n\n\n"
        "def prepare_eval_loader(batch_size):\n"
        "    return make_loader(TensorDataset(torch.randn(10, 4)), batch_size)\n"
    )
    found, facts = programs(tmp_path)
    assert found == {"data.py": ("prepare_dataloader",), "loaders.py": ("make_loader",)}
    # Nothing changed: the files' facts, with what they tell, answer without a read.
    from xlalint.engine import source as sourcefile

    def no_read(path):
        raise AssertionError(f"{path} read again")

    monkeypatch.setattr(sourcefile, "read", no_read)
    assert programs(tmp_path, facts)[0] == found


async def alone_session(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(GENERATE_MODULE)
    (tmp_path / "train.py").write_text(CPU_TRAINER)
    client = await started(tmp_path)
    assert await codes(client, open_file(client, tmp_path / "model.py")) == []
    await stopped(client)


def test_a_module_with_no_xla_importer_is_checked_alone(tmp_path):
    asyncio.run(alone_session(tmp_path))


CUDA_SCRIPT = "import torch\n\nmodel = torch.nn.Linear(4, 2).cuda()\n\n\ndef f(x):\n    return x.cuda()\n"


async def resolve_session(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.xlalint]\nignore = ["XLA103"]\n')
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    resolves = types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            code_action=types.CodeActionClientCapabilities(
                data_support=True, resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"])
            )
        )
    )
    client = await started(tmp_path, resolves)
    uri = open_file(client, tmp_path / "train.py")
    assert await codes(client, uri) == ["XLA104", "XLA104"]
    line = types.Range(types.Position(6, 0), types.Position(6, 19))
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(types.TextDocumentIdentifier(uri), line, types.CodeActionContext(diagnostics=[]))
    )
    # The quick fix comes with its edit (found from its statement and the imports);
    # fix-all without one, until the client resolves it.
    quick, fix_all = actions
    assert quick.kind == types.CodeActionKind.QuickFix and quick.diagnostics[0].range.start.line == 6
    assert apply(CUDA_SCRIPT, quick.edit.changes[uri]) == (
        "import torch\nimport torch_xla\n\nmodel = torch.nn.Linear(4, 2).cuda()\n\n\n"
        "def f(x):\n    return x.to(torch_xla.device())\n"
    )
    assert fix_all.kind == FIX_ALL and fix_all.edit is None
    resolved = await client.code_action_resolve_async(fix_all)
    fixed = apply(CUDA_SCRIPT, resolved.edit.changes[uri])
    assert fixed.count("torch_xla.device()") == 2 and ".cuda()" not in fixed
    await stopped(client)


def test_fix_all_is_resolved_when_the_client_asks_for_it(tmp_path):
    asyncio.run(resolve_session(tmp_path))


async def lint_once_session(tmp_path: Path) -> None:
    counter = tmp_path / "lints.txt"
    text = f"# count: {counter}\nimport torch\nx = torch.ones(2).cuda()\n"
    client = await started(tmp_path, command=("-c", COMMAND))
    uri = (tmp_path / "train.py").as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text)))
    assert await codes(client, uri) == ["XLA104"]

    async def actions() -> list[types.CodeAction]:
        line = types.Range(types.Position(2, 0), types.Position(2, 24))
        context = types.CodeActionContext(diagnostics=[])
        return await client.text_document_code_action_async(
            types.CodeActionParams(types.TextDocumentIdentifier(uri), line, context)
        )

    # The code actions on the version published use its lint: it is not linted again.
    assert [a.kind for a in await actions()] == [types.CodeActionKind.QuickFix, FIX_ALL]
    assert counter.read_text().count("linted") == 1
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [types.TextDocumentContentChangeWholeDocument(text=text + "y = x.cuda()\n")],
        )
    )
    assert await codes(client, uri) == ["XLA104", "XLA104"]
    assert len(await actions()) == 2
    assert counter.read_text().count("linted") == 2
    await stopped(client)


def test_each_version_is_linted_once(tmp_path):
    asyncio.run(lint_once_session(tmp_path))


def test_code_actions_on_a_linted_version_use_its_lint(monkeypatch, tmp_path):
    from xlalint import server_lint

    uri = (tmp_path / "train.py").as_uri()
    linted, _ = server_lint.analyze_document(uri, CUDA_SCRIPT)
    line = types.Range(types.Position(6, 0), types.Position(6, 19))

    def no_lint(*args):
        raise AssertionError("linted again")

    monkeypatch.setattr(server_lint, "lint", no_lint)
    params = types.CodeActionParams(types.TextDocumentIdentifier(uri), line, types.CodeActionContext(diagnostics=[]))
    actions, _ = server_lint.document_code_actions(uri, CUDA_SCRIPT, "python", params, False, linted.near(line), True)
    assert [a.kind for a in actions] == [types.CodeActionKind.QuickFix, FIX_ALL]
    assert actions[0].edit is not None and actions[1].edit is None and actions[1].data == {"uri": uri, "fix": "all"}


async def notebook_resolve_session(tmp_path: Path) -> None:
    from test_server import NOTEBOOK_CELLS

    from xlalint.server import NOTEBOOK_FIX_ALL

    (tmp_path / "pyproject.toml").write_text('[tool.xlalint]\nignore = ["XLA103"]\n')
    path = tmp_path / "train.ipynb"
    cell_uris = [f"vscode-notebook-cell:{path}#cell{i}" for i in range(len(NOTEBOOK_CELLS))]
    texts = {uri: text for uri, (_, _, text) in zip(cell_uris, NOTEBOOK_CELLS, strict=True)}
    capabilities = types.ClientCapabilities(
        text_document=types.TextDocumentClientCapabilities(
            code_action=types.CodeActionClientCapabilities(
                data_support=True, resolve_support=types.ClientCodeActionResolveOptions(properties=["edit"])
            )
        ),
        notebook_document=types.NotebookDocumentClientCapabilities(
            synchronization=types.NotebookDocumentSyncClientCapabilities()
        ),
    )
    client = await started(tmp_path, capabilities)
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=path.as_uri(),
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
    assert await codes(client, cell_uris[2]) == ["XLA104"]
    [action] = await client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(cell_uris[1]),
            types.Range(types.Position(0, 0), types.Position(0, 0)),
            types.CodeActionContext(diagnostics=[], only=["notebook.source.fixAll"]),
        )
    )
    assert action.kind == NOTEBOOK_FIX_ALL and action.edit is None
    resolved = await client.code_action_resolve_async(action)
    fixed = {uri: apply(texts[uri], edits) for uri, edits in resolved.edit.changes.items()}
    assert set(fixed) == {cell_uris[1], cell_uris[2], cell_uris[4]}
    assert fixed[cell_uris[4]] == "y = model(x.cuda())  # noqa: XLA104\nz = model(x).to(torch_xla.device())"
    await stopped(client)


def test_notebook_fix_all_is_resolved_when_the_client_asks_for_it(tmp_path):
    asyncio.run(notebook_resolve_session(tmp_path))


async def slow_program_session(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "model.py").write_text(GENERATE_MODULE)
    (tmp_path / "train.py").write_text(XLA_TRAINER)
    gate = tmp_path / "hold-programs"
    gate.write_text("")
    client = await started(tmp_path, command=("-c", COMMAND))
    model = open_file(client, tmp_path / "model.py")
    # The folder's programs take long: model.py is checked alone meanwhile...
    assert await codes(client, model) == []
    gate.unlink()
    # ...and again once they are known.
    assert await codes(client, model) == ["XLA307"]
    await stopped(client)


def test_a_document_waits_for_its_program_a_moment_only(tmp_path):
    asyncio.run(slow_program_session(tmp_path))


def test_the_lint_process_collects_garbage_as_the_command_line_does():
    """Issue 39: a spawned lint process started with Python's collector thresholds, and
    collecting between lints took a fifth of a large document's lint."""
    import gc
    import multiprocessing

    from xlalint import server_lint
    from xlalint.engine.collector import THRESHOLDS

    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=server_lint.serve, args=(child,), daemon=True)
    process.start()
    try:
        parent.send((gc.get_threshold, ()))
        ok, thresholds = parent.recv()
    finally:
        process.kill()
    assert ok and all(now >= wanted for now, wanted in zip(thresholds, THRESHOLDS))
