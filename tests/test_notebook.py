"""Notebooks end to end: check, JSON, fix round trips that nbformat validates, magics,
layout, folder walks, --add-noqa."""

from __future__ import annotations

import json
import re

import nbformat
import pytest
from support import run_cli

from xlalint.engine.notebook import CellText, Notebook, NotebookError, split_module


def notebook(*cells, path=None):
    """A notebook as nbformat writes it: ("md"|"code", source[, outputs])."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for kind, source, *outputs in cells:
        if kind == "md":
            nb.cells.append(nbformat.v4.new_markdown_cell(source))
        else:
            cell = nbformat.v4.new_code_cell(source, execution_count=1)
            cell.outputs = [nbformat.v4.new_output("stream", text=text) for text in (outputs[0] if outputs else [])]
            nb.cells.append(cell)
    text = nbformat.writes(nb) + "\n"
    if path is not None:
        path.write_text(text, encoding="utf-8")
    return text


TRAIN = (
    ("md", "# Fine-tune on a TPU"),
    ("code", "!pip install transformers\n%matplotlib inline\nimport torch\nimport torch_xla", ["Collecting...\n"]),
    ("code", "%%time\nmodel = torch.nn.Linear(4, 2).cuda()\nx = torch.ones(3, 4)"),
    ("code", "%%bash\necho .cuda()"),
    ("md", "Now the step:"),
    ("code", 'y = model(x.cuda())\nfiles = !ls\nprint("a"\n      % 3)\nmodel?', ["hello\n", "world\n"]),
)


def out(result) -> str:
    return result.stdout.decode()


def test_check_reports_cells_and_leaves_magics_alone(tmp_path):
    notebook(*TRAIN, path=tmp_path / "nb.ipynb")
    result = run_cli("check", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    lines = [line for line in out(result).splitlines() if "XLA" in line]
    # Cells count from the top, markdown included; lines count within the cell.
    assert lines[0].startswith("nb.ipynb:cell 3:2:9: XLA104 [*] ")
    assert lines[1].startswith("nb.ipynb:cell 6:1:11: XLA104 [*] ")
    # No syntax error for the magics, no finding in the %%bash cell.
    assert len(lines) == 2


def test_json_has_the_cell_and_cell_relative_locations_and_edits(tmp_path):
    notebook(*TRAIN, path=tmp_path / "nb.ipynb")
    result = run_cli("check", "--no-cache", "--output-format", "json", "nb.ipynb", cwd=tmp_path)
    findings = json.loads(out(result))
    assert [(f["cell"], f["location"], f["end_location"]) for f in findings] == [
        (3, {"row": 2, "column": 9}, {"row": 2, "column": 37}),
        (6, {"row": 1, "column": 11}, {"row": 1, "column": 19}),
    ]
    edit = findings[1]["fix"]["edits"][0]
    assert edit["location"]["row"] == 1 and edit["content"].startswith("to(torch_xla.device())")
    assert findings[0]["filename"].endswith("nb.ipynb")


def test_fix_rewrites_only_code_sources_and_keeps_the_layout(tmp_path):
    path = tmp_path / "nb.ipynb"
    before = notebook(*TRAIN, path=path)
    result = run_cli("fix", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 0, out(result) + result.stderr.decode()
    after = path.read_text(encoding="utf-8")
    nbformat.validate(nbformat.reads(after, as_version=4))
    old, new = json.loads(before), json.loads(after)
    # Everything but the two fixed sources is as it was: outputs, metadata, ids, order.
    assert old["metadata"] == new["metadata"] and old["nbformat"] == new["nbformat"]
    for a, b in zip(old["cells"], new["cells"], strict=True):
        assert {k: v for k, v in a.items() if k != "source"} == {k: v for k, v in b.items() if k != "source"}
    changed = [i + 1 for i, (a, b) in enumerate(zip(old["cells"], new["cells"])) if a["source"] != b["source"]]
    assert changed == [3, 6]
    assert (
        "".join(new["cells"][2]["source"])
        == "%%time\nmodel = torch.nn.Linear(4, 2).to(torch_xla.device())\nx = torch.ones(3, 4)"
    )
    assert "".join(new["cells"][5]["source"]).startswith("y = model(x.to(torch_xla.device()))\nfiles = !ls\n")
    assert "".join(new["cells"][5]["source"]).endswith("% 3)\nmodel?")
    # The JSON text differs only on the two source lines (same indent, key order, newline).
    diff = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert len(diff) == 2 and after.endswith("}\n")
    # A second fix changes nothing.
    again = run_cli("fix", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert again.returncode == 0 and path.read_text(encoding="utf-8") == after


def test_fix_puts_a_needed_import_after_the_imports_not_before_pip_install(tmp_path):
    path = tmp_path / "nb.ipynb"
    notebook(
        ("code", "%pip install torch_xla"),
        ("code", "import torch\nfor step in range(3):\n    !echo hi\n    x = torch.ones(2).cuda()"),
        path=path,
    )
    result = run_cli("fix", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 0, out(result)
    cells = nbformat.reads(path.read_text(), as_version=4).cells
    assert cells[0].source == "%pip install torch_xla"
    assert cells[1].source == (
        "import torch\nimport torch_xla\n\nfor step in range(3):\n    !echo hi\n    x = torch.ones(2).to(torch_xla.device())"
    )


@pytest.mark.parametrize(
    "first, expected",
    [
        ("import torch", "import torch\nimport torch_xla"),
        ("import torch\n", "import torch\nimport torch_xla\n"),
        ("import torch\n\n", "import torch\nimport torch_xla\n\n"),
        ("import torch\r\n", "import torch\r\nimport torch_xla\r\n"),
    ],
    ids=["no line break", "a line break", "a blank line", "crlf"],
)
def test_an_import_added_at_the_end_of_a_cell_leaves_it_ending_as_it_did(tmp_path, first, expected):
    # The import gets a blank line below it in the module, before the next cell's marker:
    # that blank line is not the cell's.
    path = tmp_path / "nb.ipynb"
    notebook(("code", first), ("code", "x = torch.ones(2).cuda()"), path=path)
    result = run_cli("fix", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 0, out(result) + result.stderr.decode()
    text = path.read_text(encoding="utf-8")
    cells = json.loads(text)["cells"]
    assert "".join(cells[0]["source"]) == expected
    assert "".join(cells[1]["source"]) == "x = torch.ones(2).to(torch_xla.device())"
    nbformat.validate(nbformat.reads(text, as_version=4))
    assert run_cli("fix", "--no-cache", "nb.ipynb", cwd=tmp_path).returncode == 0
    assert path.read_text(encoding="utf-8") == text


@pytest.mark.parametrize(
    "cell, fixed, expected",
    [
        ("a = 1", "a = 1\n\n\n", "a = 1"),
        ("a = 1\n", "a = 1\nb = 2\n\n", "a = 1\nb = 2\n"),
        ("\n\n", "\n\n", "\n\n"),  # a cell of blank lines that no fix touched
        ("torch.cuda.empty_cache()\n", "", ""),  # a cell a fix emptied
    ],
)
def test_split_module_ends_each_cell_as_it_ended(cell, fixed, expected):
    nb = Notebook(json.dumps({"cells": [{"cell_type": "code", "source": s} for s in (cell, "z = 3")]}))
    module = f"# xlalint-notebook-cell: 1\n{fixed}# xlalint-notebook-cell: 2\nz = 3\n"
    assert [c.text for c in split_module(module, nb.module.cells)] == [expected, "z = 3"]


def test_an_if_a_fix_empties_is_removed_and_the_cell_stays_in_place(tmp_path):
    # The cell's marker comment is above the `if` in the module: it stays, as every
    # comment line above a removed `if` does, so the notebook is written.
    path = tmp_path / "nb.ipynb"
    notebook(
        ("code", "import torch\nimport argparse\nargs = argparse.Namespace(gpu=0)"),
        ("code", "if args.gpu is not None:\n    torch.cuda.set_device(args.gpu)"),
        ("code", "if args.gpu is not None:\n    torch.cuda.set_device(args.gpu)\nmodel = torch.nn.Linear(2, 2)"),
        path=path,
    )
    result = run_cli("fix", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 0, out(result) + result.stderr.decode()
    cells = nbformat.reads(path.read_text(), as_version=4).cells
    assert [cell.source for cell in cells[1:]] == ["", "model = torch.nn.Linear(2, 2)"]
    text = path.read_text()
    assert run_cli("fix", "--no-cache", "nb.ipynb", cwd=tmp_path).returncode == 0 and path.read_text() == text


def test_a_cell_whose_only_statement_a_fix_removes_is_written_empty(tmp_path):
    # The cell's marker comment is above the removed statement in the module: it stays,
    # as every comment line above a removed statement does, so the notebook is written.
    path = tmp_path / "nb.ipynb"
    notebook(
        ("code", "import torch\nmodel = torch.nn.Linear(2, 2)"),
        ("code", "torch.cuda.set_device(0)"),
        ("code", "# free what the last run left\ntorch.cuda.empty_cache()\ny = model(torch.ones(1, 2))"),
        path=path,
    )
    result = run_cli("fix", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 0, out(result) + result.stderr.decode()
    cells = nbformat.reads(path.read_text(), as_version=4).cells
    assert [cell.source for cell in cells[1:]] == ["", "# free what the last run left\ny = model(torch.ones(1, 2))"]
    text = path.read_text()
    assert run_cli("fix", "--no-cache", "nb.ipynb", cwd=tmp_path).returncode == 0 and path.read_text() == text


def test_diff_shows_changed_cells_and_writes_nothing(tmp_path):
    path = tmp_path / "nb.ipynb"
    before = notebook(*TRAIN, path=path)
    result = run_cli("fix", "--diff", "--no-cache", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 1
    text = out(result)
    assert "--- a/nb.ipynb:cell 3\n+++ b/nb.ipynb:cell 3\n" in text
    assert "-y = model(x.cuda())\n+y = model(x.to(torch_xla.device()))\n" in text
    assert "xlalint-notebook" not in text
    assert path.read_text() == before


def test_a_folder_walk_includes_notebooks_but_not_checkpoints(tmp_path):
    notebook(*TRAIN, path=tmp_path / "nb.ipynb")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    notebook(*TRAIN, path=tmp_path / ".ipynb_checkpoints" / "nb-checkpoint.ipynb")
    result = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    files = {line.split(":", 1)[0] for line in out(result).splitlines() if " XLA" in line}
    assert files == {"nb.ipynb"}


def test_many_notebooks_are_checked_and_fixed_in_the_process_pool(tmp_path):
    from xlalint.engine.runner import PARALLEL_THRESHOLD

    for i in range(PARALLEL_THRESHOLD + 2):
        notebook(*TRAIN, path=tmp_path / f"nb{i:02}.ipynb")
    checked = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    lines = [line for line in out(checked).splitlines() if " XLA104 " in line]
    assert len(lines) == 2 * (PARALLEL_THRESHOLD + 2) and lines[0].startswith("nb00.ipynb:cell 3:2:9: XLA104")
    fixed = run_cli("fix", "--diff", ".", cwd=tmp_path)
    assert fixed.returncode == 1 and out(fixed).count("+++ b/nb") == 2 * (PARALLEL_THRESHOLD + 2)
    # The reports come back from the pool with where the cells' code is in each file.
    github = run_cli("check", "--no-cache", "--output-format", "github", ".", cwd=tmp_path)
    for i in range(PARALLEL_THRESHOLD + 2):
        found = annotated_code(github, tmp_path / f"nb{i:02}.ipynb")
        assert [text for text, _ in found] == ["torch.nn.Linear(4, 2).cuda()", "x.cuda()"]


def test_syntax_errors_and_bad_notebooks_are_xla000(tmp_path):
    notebook(("code", "import torch"), ("code", "x = (\n"), path=tmp_path / "broken.ipynb")
    (tmp_path / "json.ipynb").write_text('{"cells": [')
    (tmp_path / "other.ipynb").write_text('{"worksheets": []}')
    result = run_cli("check", "--no-cache", ".", cwd=tmp_path)
    assert result.returncode == 2
    lines = out(result).splitlines()
    assert any(line.startswith("broken.ipynb:cell 2:") and "XLA000 SyntaxError" in line for line in lines)
    assert any(line.startswith("json.ipynb:1:1: XLA000 notebook is not valid JSON") for line in lines)
    assert any(line.startswith("other.ipynb:1:1: XLA000 is not a Jupyter notebook") for line in lines)


# Cells IPython runs that are not Python: automagic (a one-line cell whose first word is a
# line magic, `%` left out), also in a `%%capture` body, indented; escapes.
IPYTHON_CELLS = (
    ("code", "pip install torch_xla"),
    ("code", "\nconda install -y libsndfile\n"),
    ("code", "%%capture\npip install -q transformers"),
    ("code", "  cd /content/drive"),
    ("code", "/print 1 2\n,print a b\n;print a b"),
    ("code", "import torch\nmodel = torch.nn.Linear(4, 2).cuda()"),
)


def test_cells_ipython_runs_are_skipped_and_the_rest_is_checked(tmp_path):
    notebook(*IPYTHON_CELLS, path=tmp_path / "nb.ipynb")
    result = run_cli("check", "--no-cache", "--exit-zero", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 0, out(result)
    lines = [line for line in out(result).splitlines() if "XLA" in line]
    assert len(lines) == 1 and lines[0].startswith("nb.ipynb:cell 6:2:9: XLA104 [*] ")
    assert run_cli("check", "--no-cache", "nb.ipynb", cwd=tmp_path).returncode == 1


def test_a_fix_leaves_the_ipython_cells_byte_for_byte(tmp_path):
    path = tmp_path / "nb.ipynb"
    notebook(*IPYTHON_CELLS, path=path)
    before = json.loads(path.read_text())["cells"]
    result = run_cli("check", "--no-cache", "--fix", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 0, out(result) + result.stderr.decode()
    text = path.read_text()
    nbformat.validate(nbformat.reads(text, as_version=4))
    after = json.loads(text)["cells"]
    assert [cell["source"] for cell in after[:5]] == [cell["source"] for cell in before[:5]]
    fixed = "import torch\nimport torch_xla\n\nmodel = torch.nn.Linear(4, 2).to(torch_xla.device())"
    assert "".join(after[5]["source"]) == fixed


@pytest.mark.parametrize(
    "source",
    [
        "pip install x\nimport torch",  # automagic runs on one-line cells only: IPython fails too
        "pip3 install x",  # not a line magic
        "cd = ",  # an assignment, not a magic
    ],
)
def test_what_ipython_cannot_run_is_still_a_syntax_error_in_its_cell(tmp_path, source):
    notebook(("code", "import torch_xla"), ("code", source), path=tmp_path / "nb.ipynb")
    result = run_cli("check", "--no-cache", "--exit-zero", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 2
    assert out(result).startswith("nb.ipynb:cell 2:1:"), out(result)
    assert "XLA000 SyntaxError" in out(result)


def test_a_cell_that_is_not_python_has_its_own_error_and_the_others_are_analysed(tmp_path):
    # Issue 38: shell lines without `!` in a cell of several lines are not Python to
    # IPython either; IPython compiles each cell by itself, so the others still run.
    path = tmp_path / "nb.ipynb"
    shell = "pip install torch_xla\ncd /content\nls -la"
    notebook(
        ("code", shell),
        ("code", "import torch\nimport torch_xla\nmodel = torch.nn.Linear(4, 2).to(torch_xla.device())"),
        ("code", "for x in loader:\n    model(x).sum().backward()\n    opt.step()"),
        path=path,
    )
    lines = out(run_cli("check", "--no-cache", "nb.ipynb", cwd=tmp_path)).splitlines()
    assert lines[0].startswith("nb.ipynb:cell 1:1:5: XLA000 SyntaxError")
    assert lines[1].startswith("nb.ipynb:cell 3:1:1: XLA103 ")
    result = run_cli("check", "--no-cache", "--fix", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 2, out(result)
    cells = json.loads(path.read_text())["cells"]
    assert "".join(cells[0]["source"]) == shell  # left as it was
    assert "".join(cells[2]["source"]).endswith("    opt.step()\n    torch_xla.sync()")
    sarif = json.loads(out(run_cli("check", "--no-cache", "--output-format", "sarif", "nb.ipynb", cwd=tmp_path)))
    regions = [r["locations"][0]["physicalLocation"].get("region") for r in sarif["runs"][0]["results"]]
    assert all(regions), regions  # the error is located in the file's JSON text too


def test_noqa_in_a_cell_and_add_noqa_round_trip(tmp_path):
    path = tmp_path / "nb.ipynb"
    notebook(*TRAIN, path=path)
    added = run_cli("check", "--add-noqa", "nb.ipynb", cwd=tmp_path)
    assert added.returncode == 0 and "Added 2 noqa directives." in added.stderr.decode()
    text = path.read_text()
    nbformat.validate(nbformat.reads(text, as_version=4))
    cells = json.loads(text)["cells"]
    assert "model = torch.nn.Linear(4, 2).cuda()  # noqa: XLA104\n" in cells[2]["source"]  # a list of lines
    assert run_cli("check", "--no-cache", "nb.ipynb", cwd=tmp_path).returncode == 0
    again = run_cli("check", "--add-noqa", "nb.ipynb", cwd=tmp_path)
    assert "Added 0 noqa directives." in again.stderr.decode() and path.read_text() == text


def test_github_annotations_without_the_notebook_text_name_only_the_cell():
    # The lines of a cell are not lines of the file: with no text to find them in, the
    # annotation has no line (GitHub shows it on the file).
    from xlalint.engine.reporters import render_github
    from xlalint.model import Finding, Span

    finding = Finding("XLA104", "cuda-device", "use torch_xla", "nb.ipynb", Span(2, 8, 2, 15), cell=3)
    assert render_github([finding]) == (
        "::error title=xlalint (XLA104),file=nb.ipynb::nb.ipynb:cell 3:2:9: XLA104 use torch_xla"
    )


ANNOTATION = re.compile(
    r"::error title=xlalint \((?P<code>XLA\d+)\),file=(?P<file>[^,]+),line=(?P<line>\d+),col=(?P<col>\d+),"
    r"endLine=(?P<end_line>\d+),endColumn=(?P<end_col>\d+)::(?P<message>.*)"
)


def annotated_code(result, path) -> list[tuple[str, str]]:
    """(the text of the notebook file each annotation on ``path`` points at, its message)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for line in out(result).splitlines():
        match = ANNOTATION.fullmatch(line)
        assert match is not None, line
        if match["file"] != path.name:
            continue
        assert match["line"] == match["end_line"]
        text = lines[int(match["line"]) - 1][int(match["col"]) - 1 : int(match["end_col"]) - 1]
        found.append((text, match["message"]))
    return found


def test_github_annotations_point_at_the_code_in_the_notebook_file(tmp_path):
    path = tmp_path / "nb.ipynb"
    notebook(*TRAIN, path=path)
    result = run_cli("check", "--no-cache", "--output-format", "github", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 1
    found = annotated_code(result, path)
    assert [text for text, _ in found] == ["torch.nn.Linear(4, 2).cuda()", "x.cuda()"]
    assert [message.split(": XLA")[0] for _, message in found] == ["nb.ipynb:cell 3:2:9", "nb.ipynb:cell 6:1:11"]


def test_github_annotations_after_a_fix_point_into_the_fixed_file(tmp_path):
    # The fix adds an import in cell 2: what is left is found on the lines of the new file.
    path = tmp_path / "nb.ipynb"
    notebook(
        ("md", "# Training"),
        ("code", "import torch\nmodel = torch.nn.Linear(4, 2).cuda()"),
        ("code", "for x in data:\n    loss = model(torch.nonzero(x)).sum()\n    loss.backward()\n    opt.step()"),
        path=path,
    )
    result = run_cli("fix", "--no-cache", "--output-format", "github", "nb.ipynb", cwd=tmp_path)
    assert "torch_xla" in path.read_text()
    found = annotated_code(result, path)
    assert [text for text, _ in found] == ["torch.nonzero(x)"]
    assert found[0][1].startswith("nb.ipynb:cell 3:2:18: XLA302 ")


def test_stdin_notebook_is_checked(tmp_path):
    text = notebook(*TRAIN)
    result = run_cli("check", "--stdin-filename", "nb.ipynb", "-", stdin=text, cwd=tmp_path)
    assert result.returncode == 1
    assert "nb.ipynb:cell 3:2:9: XLA104" in out(result)


def test_a_notebook_of_another_language_is_not_checked(tmp_path):
    nb = json.loads(notebook(("code", "import torch\nx.cuda()")))
    nb["metadata"]["language_info"] = {"name": "R"}
    (tmp_path / "r.ipynb").write_text(json.dumps(nb))
    assert run_cli("check", "--no-cache", "r.ipynb", cwd=tmp_path).returncode == 0


# -- the module made of the cells ------------------------------------------------------------


def test_magics_become_placeholders_and_come_back():
    source = 'x = 1\n!pip install a \\\n    b\nif x:\n    %time f()\ns = """\n%d\n"""\nobj??'
    nb = Notebook(json.dumps({"cells": [{"cell_type": "code", "source": source, "metadata": {}}]}))
    module = nb.module
    assert isinstance(module, CellText)
    compile(module, "<nb>", "exec")  # the placeholders are Python
    assert "!pip" not in module and "%time" not in module
    assert '"""\n%d\n"""' in module  # a line of a string is not a magic
    cells = split_module(str(module), module.cells)
    assert cells[0].text == source


def test_a_fix_that_moves_code_between_cells_is_refused():
    nb = Notebook(json.dumps({"cells": [{"cell_type": "code", "source": s} for s in ("a = 1", "b = 2")]}))
    swapped = str(nb.module).replace("cell: 1", "cell: X").replace("cell: 2", "cell: 1").replace("cell: X", "cell: 2")
    with pytest.raises(NotebookError):
        split_module(swapped, nb.module.cells)


# -- the fixed notebook runs on torch_xla -------------------------------------------------------

CUDA_NOTEBOOK = (
    ("md", "# A small CUDA training notebook"),
    ("code", "%pip install torch_xla\n%matplotlib inline\nimport torch\nimport torch_xla"),
    (
        "code",
        "model = torch.nn.Linear(8, 1).cuda()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "data = [(torch.randn(4, 8).cuda(), torch.randn(4, 1).cuda()) for _ in range(6)]",
    ),
    (
        "code",
        "%%time\nfor step, (x, y) in enumerate(data):\n    opt.zero_grad()\n"
        "    loss = torch.nn.functional.mse_loss(model(x), y)\n    loss.backward()\n    opt.step()\n    !echo step",
    ),
    ("code", "print('final', loss.item())"),
)


def test_the_fixed_notebook_runs_on_torch_xla(tmp_path):
    """Fix the notebook, run its code cells (without the IPython lines) with the harness
    on torch_xla CPU: it ports to XLA and syncs once per step."""
    import importlib.util

    if importlib.util.find_spec("torch_xla") is None:
        pytest.skip("torch_xla is not installed (the harness extra)")
    path = tmp_path / "train.ipynb"
    notebook(*CUDA_NOTEBOOK, path=path)
    fixed = run_cli("fix", "--no-cache", "train.ipynb", cwd=tmp_path)
    assert fixed.returncode == 0, out(fixed)
    assert "Found 4 errors (4 fixed, 0 remaining)." in out(fixed)
    cells = nbformat.reads(path.read_text(), as_version=4).cells
    nbformat.validate(nbformat.reads(path.read_text(), as_version=4))
    assert cells[3].source.endswith("    !echo step\n    torch_xla.sync()")
    code = [
        line
        for cell in cells
        if cell.cell_type == "code"
        for line in cell.source.splitlines()
        if not line.lstrip().startswith(("%", "!"))
    ]
    (tmp_path / "train.py").write_text("\n".join(code) + "\n")
    result = run_cli("run", "--no-fix", "--json", "run.json", "train.py", cwd=tmp_path, env={"PJRT_DEVICE": "CPU"})
    assert result.returncode == 0, out(result) + result.stderr.decode()
    run = json.loads((tmp_path / "run.json").read_text())["runs"]["original"]
    assert run["exit_code"] == 0
    assert run["syncs"] == 6 and run["compiles"] <= 2, run


@pytest.mark.parametrize(
    "layout",
    [
        {"indent": 1},
        {"indent": "\t", "crlf": True},
        {"indent": None, "separators": (",", ":")},
        {"indent": 1, "ensure_ascii": True},
    ],
)
def test_file_region_is_the_code_in_the_json_text_whatever_the_layout(layout):
    """The SARIF region of a finding: where its code is in the file's JSON text, whether
    the source is lines, one string, or pieces that do not end at line ends."""
    sources = [
        ["import torch\n", "s = '\\t\u00e9'; m = torch.nn.Linear(2, 2).cuda()\n"],
        "x = 1\ny = torch.ones(2).cuda()",
        ["z = torch.o", "nes(2).cu", "da()"],
    ]
    data = {"cells": [{"cell_type": "code", "metadata": {}, "source": source} for source in sources]}
    layout = dict(layout)
    crlf = layout.pop("crlf", False)
    text = json.dumps(data, ensure_ascii=layout.pop("ensure_ascii", False), **layout) + "\n"
    text = text.replace("\n", "\r\n") if crlf else text
    nb = Notebook(text)
    from xlalint.engine.lint import lint_source

    findings = [nb.module.to_cell(f) for f in lint_source(nb.module, "nb.ipynb")]
    regions = [nb.module.file_region(f) for f in findings]
    lines = text.replace("\r\n", "\n").split("\n")
    snippets = [lines[line - 1][col - 1 : end_col - 1] for line, col, end_line, end_col in regions if line == end_line]
    assert snippets[:2] == ["torch.nn.Linear(2, 2).cuda()", "torch.ones(2).cuda()"]
    # The third spans three JSON strings: from the first to the end of the last.
    (line, col, end_line, end_col) = regions[2]
    assert lines[line - 1][col - 1 :].startswith("torch.o") and lines[end_line - 1][: end_col - 1].endswith("da()")
