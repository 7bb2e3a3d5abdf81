"""The language server in JupyterLab: jupyterlab-lsp's virtual document of a notebook
(its code cells as one Python module, ``.virtual_documents/<notebook path>``) is linted
as the notebook, and the spec that registers the server with jupyter-lsp; and a notebook
document over the size limit, which says so as a text document does."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from lsprotocol import types

from xlalint import jupyter_lsp_spec, server_lint

ROOT = Path(__file__).resolve().parents[1]
# What jupyterlab-lsp 5.3 sent for a notebook of a markdown cell and three code cells
# (recorded from JupyterLab 4.6): cells joined by blank lines, `!pip` turned into Python.
VIRTUAL_TEXT = (
    '\n\n\nget_ipython().getoutput("pip install torch_xla")\nimport torch\n\n\n'
    "model = torch.nn.Linear(4, 2).cuda()\nx = torch.ones(3, 4)\n\n\n"
    "for step in range(10):\n    loss = model(x).sum()\n    loss.backward()\n    torch.cuda.synchronize()\n"
)


def test_virtual_document_stands_for_its_notebook(tmp_path):
    notebook = tmp_path / "nbs" / "train.ipynb"
    virtual = tmp_path / ".virtual_documents" / "nbs" / "train.ipynb"
    assert server_lint.document_path(virtual.as_uri()) == str(notebook)
    assert server_lint.document_path(notebook.as_uri()) == str(notebook)
    script = tmp_path / "train.py"
    assert server_lint.document_path(script.as_uri()) == str(script)
    assert server_lint.document_path("untitled:Untitled-1") is None


def test_virtual_document_of_a_notebook_is_linted(tmp_path):
    virtual_uri = (tmp_path / ".virtual_documents" / "train.ipynb").as_uri()
    diagnostics, messages = server_lint.lint_document(virtual_uri, VIRTUAL_TEXT, "python")
    assert messages == []
    found = [(d.code, d.range.start.line, d.range.start.character) for d in diagnostics]
    # No XLA103: the port makes the step's `torch.cuda.synchronize()` its sync.
    assert found == [("XLA104", 7, 8), ("XLA104", 14, 4)]
    # The notebook's JSON opened as text (VS Code's JSON editor): its cells come as a
    # notebook document, the JSON gets nothing.
    assert server_lint.lint_document((tmp_path / "train.ipynb").as_uri(), "{}", "json") == ([], [])


def test_virtual_document_takes_the_notebooks_config(tmp_path):
    # per-file-ignores and exclude name the notebook's path, not jupyter-lsp's folder.
    (tmp_path / "pyproject.toml").write_text(
        '[tool.xlalint]\nexclude = ["old/*.ipynb"]\n[tool.xlalint.per-file-ignores]\n"nbs/*.ipynb" = ["XLA103"]\n'
    )
    nbs = (tmp_path / ".virtual_documents" / "nbs" / "train.ipynb").as_uri()
    diagnostics, _ = server_lint.lint_document(nbs, VIRTUAL_TEXT, "python")
    assert [d.code for d in diagnostics] == ["XLA104", "XLA104"]
    old = (tmp_path / ".virtual_documents" / "old" / "train.ipynb").as_uri()
    assert server_lint.lint_document(old, VIRTUAL_TEXT, "python") == ([], [])


def test_code_actions_on_a_virtual_document(tmp_path):
    virtual_uri = (tmp_path / ".virtual_documents" / "train.ipynb").as_uri()
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(virtual_uri),
        range=types.Range(types.Position(7, 8), types.Position(7, 36)),
        context=types.CodeActionContext(diagnostics=[]),
    )
    actions, _ = server_lint.document_code_actions(virtual_uri, VIRTUAL_TEXT, "python", params, False)
    assert [a.kind for a in actions] == [types.CodeActionKind.QuickFix, server_lint.FIX_ALL]
    assert actions[0].diagnostics[0].code == "XLA104"
    assert set(actions[0].edit.changes) == {virtual_uri}
    assert server_lint.document_code_actions(virtual_uri, "{}", "json", params, False) == ([], [])


def test_spec_for_jupyter_lsp():
    specs = jupyter_lsp_spec.spec()
    assert list(specs) == ["xlalint"]
    spec = specs["xlalint"]
    assert spec["argv"] == [sys.executable, "-m", "xlalint", "server"]
    assert spec["languages"] == ["python"] and "text/x-ipython" in spec["mime_types"]
    assert "[jupyter]" in spec["install"]["pip"]
    assert jupyter_lsp_spec.spec.is_installed() is (importlib.util.find_spec("pygls") is not None)
    # The config shipped for a JupyterLab in another environment: the same, `xlalint` from the PATH.
    shipped = json.loads((ROOT / "editors" / "jupyterlab" / "jupyter_server_config.json").read_text())
    servers = shipped["LanguageServerManager"]["language_servers"]
    assert servers == {"xlalint": {**jupyter_lsp_spec.SPEC, "argv": ["xlalint", "server"]}}
    # jupyter-lsp finds the spec through this entry point.
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"]["jupyter_lsp_spec_v1"] == {"xlalint": "xlalint.jupyter_lsp_spec:spec"}


def test_spec_is_valid_for_jupyter_lsp():
    schema = pytest.importorskip("jupyter_lsp.schema", reason="jupyter-lsp is not installed (the `jupyter` extra)")
    assert jupyter_lsp_spec.SPEC["version"] == schema.SPEC_VERSION
    assert list(schema.LANGUAGE_SERVER_SPEC_MAP.iter_errors(jupyter_lsp_spec.spec())) == []


def test_jupyter_lsp_finds_the_server_through_the_entry_point(tmp_path, monkeypatch):
    """jupyter-lsp's own discovery, on an install whose metadata has only our entry point."""
    manager_module = pytest.importorskip(
        "jupyter_lsp.manager", reason="jupyter-lsp is not installed (the `jupyter` extra)"
    )
    import importlib

    import tomllib

    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    info = tmp_path / "xlalint_spec_only-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: xlalint-spec-only\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[jupyter_lsp_spec_v1]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points["jupyter_lsp_spec_v1"].items())
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "config"))  # no user config in the way
    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)
    manager = manager_module.LanguageServerManager()
    manager.init_language_servers()
    assert manager.language_servers["xlalint"]["argv"] == [sys.executable, "-m", "xlalint", "server"]


@pytest.mark.slow
def test_a_notebook_over_the_size_limit_says_so_on_its_first_code_cell(tmp_path):
    from xlalint.engine.source import MAX_BYTES

    uri = (tmp_path / "big.ipynb").as_uri()
    cells = [
        server_lint.CellSnapshot(2, f"{uri}#cell2", 1, "%%bash\necho hi", True),  # not Python: no module code
        server_lint.CellSnapshot(3, f"{uri}#cell3", 1, "import torch\nx = torch.ones(2).cuda()\n", True),
        server_lint.CellSnapshot(4, f"{uri}#cell4", 1, "y = 1\n" * (MAX_BYTES // 6 + 1), True),
    ]
    published, messages = server_lint.lint_notebook(uri, cells)
    assert [[d.message for d in diagnostics] for _, diagnostics in published] == [
        [],
        ["xlalint: not checked: file is too large to check (8.0 MiB; the limit is 8 MiB)"],
        [],
    ]
    assert [m.kind for m in messages] == [types.MessageType.Warning]


# A `%%time` cell as jupyterlab-lsp 5.3 puts it in the virtual document (its IPython
# overrides unwrap `%%time` and `%%capture` between two comment lines; other cell magics
# become a `get_ipython().run_cell_magic(...)` string).
TIMED_TEXT = (
    "import torch\nmodel = torch.nn.Linear(4, 2)\n\n\n"
    '# START_CELL_MAGIC("time", "")\nfor step in range(10):\n    loss = model(torch.ones(3, 4).cuda()).sum()\n'
    "    loss.backward()\n# END_CELL_MAGIC\n"
)


def test_a_time_cell_in_the_virtual_document_is_linted_on_its_own_lines(tmp_path):
    """Issue 41: the server lints a `%%time` cell's code as jupyterlab-lsp sends it, on
    the lines the cell has them (virtual line k of the block is line k of the cell).
    JupyterLab then drops them (jupyterlab-lsp skips inspections on a cell a cell-magic
    override rewrote): the README says so, exactly."""
    uri = (tmp_path / ".virtual_documents" / "train.ipynb").as_uri()
    diagnostics, messages = server_lint.lint_document(uri, TIMED_TEXT, "python")
    assert messages == []
    found = {(d.code, d.range.start.line) for d in diagnostics}
    assert ("XLA104", 6) in found and ("XLA103", 5) in found  # the loop and its `.cuda()`
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert (
        "every cell that starts with a cell magic (`%%time`, `%%capture`, `%%timeit`, ...) gets no diagnostics in JupyterLab"
        in readme
    )


def test_notebook_diagnostics_name_their_cell_and_keep_the_after_the_port_ending(tmp_path):
    """Issue 41: VS Code's Problems panel showed two notebook findings both as
    `[Ln 1, Col 1]` (a line within a cell, not which cell); the editors dropped the
    ` (after the port)` the CLI prints. The message now starts `cell N: `, N as the CLI
    counts cells (`nb.ipynb:cell N:...`), and ends as the CLI's."""
    uri = (tmp_path / "train.ipynb").as_uri()
    cells = [
        server_lint.CellSnapshot(1, f"{uri}#cell1", 1, "# Training", False),
        server_lint.CellSnapshot(2, f"{uri}#cell2", 1, "import torch\nm = torch.nn.Linear(2, 2).cuda()\n", True),
        server_lint.CellSnapshot(3, f"{uri}#cell3", 1, 'torch.save(m.state_dict(), "m.pt")\n', True),
    ]
    published, messages = server_lint.lint_notebook(uri, cells)
    assert messages == []
    by_cell = {cell.number: [d.message for d in diagnostics] for cell, diagnostics in published}
    assert by_cell[1] == []
    assert [m.split(":")[0] for m in by_cell[2]] == ["cell 2"]
    [saved] = by_cell[3]
    assert saved.startswith("cell 3: `torch.save`") and saved.endswith(" (after the port)")
    # A script's diagnostics: no cell, the same ending.
    script = (tmp_path / "train.py").as_uri()
    text = "import torch\nm = torch.nn.Linear(2, 2).cuda()\ntorch.save(m.state_dict(), 'm.pt')\n"
    diagnostics, _ = server_lint.lint_document(script, text, "python")
    assert [d.message.endswith(" (after the port)") for d in diagnostics] == [False, True]
    assert not any(d.message.startswith("cell ") for d in diagnostics)
