"""Imports a fix adds go with the file's existing imports, never above the setup code of
a notebook (issue 33 §2.7): run top to bottom, a script must install torch_xla before it
imports it. Setup code: IPython's lines (`!pip`, `%pip`, exported as
`get_ipython().system(...)`) and installs run from Python (`os.system("pip ...")`,
`subprocess` running pip)."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest

from xlalint.engine import notebook
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.fixers import imports

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "notebook_setup"


@pytest.mark.parametrize("case", ["exported_notebook", "installs_then_imports"])
def test_imports_go_below_the_setup_code(case):
    path = FIXTURES / f"{case}.py"
    result = fix_source(path.read_text(), str(path), Settings())
    assert result.error is None
    assert result.source == (FIXTURES / f"{case}.fixed.py").read_text()
    lines = result.source.splitlines()
    setup = max(i for i, line in enumerate(lines) if "get_ipython()" in line or "pip" in line)
    assert min(i for i, line in enumerate(lines) if line.startswith("import torch_xla")) > setup
    # With the file's imports, in sorted place (the exported notebook's are three cells down).
    assert "import torch\nimport torch_xla\n" in result.source or "import torch.nn as nn\nimport torch_xla\n" in (
        result.source
    )
    assert fix_source(result.source, str(path), Settings()).source == result.source


def test_the_imports_right_after_the_setup_are_joined_else_it_comes_first_after_it():
    source = 'import os\nos.system("pip install torch_xla")\nimport torch\nmodel = Net().cuda()\n'
    assert fix_source(source, "s.py", Settings()).source == (
        'import os\nos.system("pip install torch_xla")\nimport torch\nimport torch_xla\n\n'
        "model = Net().to(torch_xla.device())\n"
    )
    # No import after the setup (`import torch` above it is no place for torch_xla).
    source = 'import torch\nos.system("pip install torch_xla")\nmodel = Net().cuda()\n'
    assert fix_source(source, "s.py", Settings()).source == (
        'import torch\nos.system("pip install torch_xla")\nimport torch_xla\n\nmodel = Net().to(torch_xla.device())\n'
    )
    # An import further down may come after code that will use the new name: not there.
    source = 'import torch\nos.system("pip install torch_xla")\nmodel = Net().cuda()\nimport numpy\n'
    assert fix_source(source, "s.py", Settings()).source.startswith(
        'import torch\nos.system("pip install torch_xla")\nimport torch_xla\n\nmodel = '
    )


def test_an_install_after_the_code_is_not_setup():
    # Setup comes first: an install after the training code does not hold the imports back.
    source = 'import torch\nmodel = Net().cuda()\nos.system("pip install matplotlib")\n'
    assert fix_source(source, "s.py", Settings()).source == (
        'import torch\nimport torch_xla\n\nmodel = Net().to(torch_xla.device())\nos.system("pip install matplotlib")\n'
    )


def test_a_shell_call_that_installs_nothing_is_not_setup():
    source = 'import os\n\nimport torch\n\nos.system("ls")\nmodel = Net().cuda()\n'
    assert fix_source(source, "s.py", Settings()).source == (
        'import os\n\nimport torch\nimport torch_xla\n\nos.system("ls")\nmodel = Net().to(torch_xla.device())\n'
    )


def test_a_notebook_gets_its_imports_below_its_pip_lines(tmp_path, cli):
    path = tmp_path / "setup_cells.ipynb"
    shutil.copy(FIXTURES / "setup_cells.ipynb", path)
    result = cli("fix", "--no-cache", "setup_cells.ipynb", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert path.read_text() == (FIXTURES / "setup_cells.fixed.ipynb").read_text()
    cells = [cell.source for cell in nbformat.reads(path.read_text(), as_version=4).cells]
    # The setup cell is as it was; the import opens the next cell.
    assert cells[1] == "import torch\n!pip install -q torch_xla[tpu]\n%pip install accelerate"
    assert cells[2] == "import torch_xla\n\nmodel = torch.nn.Linear(8, 2).to(torch_xla.device())"
    again = cli("fix", "--no-cache", "setup_cells.ipynb", cwd=tmp_path)
    assert again.returncode == 0 and path.read_text() == (FIXTURES / "setup_cells.fixed.ipynb").read_text()


def test_the_fixer_knows_the_notebook_s_setup_marker():
    assert imports.SETUP_MAGIC_COMMENT == notebook.SETUP_MAGIC_COMMENT
    # Only a line that installs is setup: `!nvidia-smi` (or `%%time`) holds no import back.
    cell = notebook.code_cell(1, "!pip install -q torch_xla\n!nvidia-smi\nx = 1")
    assert cell is not None
    assert cell.python.splitlines()[:2] == [notebook.SETUP_MAGIC_COMMENT, notebook.MAGIC_COMMENT]
