"""``fixers/local_edits.py``: one fix's edits from the statements it touches are the
whole file's (``apply.fix_edits``), and a fix on a large file parses only its part."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from xlalint.engine.config import Settings
from xlalint.engine.lint import lint_source
from xlalint.fixers import local_edits
from xlalint.fixers.apply import fix_edits
from xlalint.fixers.local_edits import local_fix_edits

FIXTURES = Path(__file__).parent / "fixtures"
# Fixes that add, remove and move statements (neighbours set the blank lines), add
# imports below a notebook's setup code, a `def` at the module's top level, loops.
FILES = [
    "XLA104/availability.py",
    "XLA104/availability_warning.py",
    "XLA104/aliases.py",
    "XLA105/mp_train.py",
    "XLA105/hf_trainer.py",
    "XLA103/grad_accum.py",
    "XLA106/amp_loop.py",
    "XLA204/hf_finetune.py",
    "XLA502/project_package/train.py",
    "notebook_setup/installs_then_imports.py",
    "notebook_setup/exported_notebook.py",
]


@pytest.mark.parametrize("name", FILES)
def test_the_edits_of_a_fix_from_its_statements_are_the_whole_files(name):
    path = FIXTURES / name
    source = path.read_text()
    tree = ast.parse(source)
    fixes = [f.fix for f in lint_source(source, str(path), Settings()) if f.fix is not None]
    assert fixes
    local = 0
    for fix in fixes:
        found = local_fix_edits(source, tree, fix)
        if found is not None:  # None: the caller asks for the whole file's
            assert found == fix_edits(source, fix), fix
            local += 1
    assert local >= len(fixes) - 1


BLOCK = """

def step_{i}(model, batch):
    model = model.cuda()
    for p in model.parameters():
        p.data = p.data.cuda()
    return model(batch["x"].cuda())
"""


def test_a_fix_on_a_large_file_parses_its_statement_and_the_imports_only(monkeypatch):
    source = "import torch\nimport torch.nn as nn\n" + "".join(BLOCK.format(i=i) for i in range(400))
    tree = ast.parse(source)
    findings = [f for f in lint_source(source, "/tmp/large.py", Settings()) if f.fix is not None]
    middle = next(f for f in findings if f.span.line > 1400)
    parsed = []
    real = cst.parse_module
    monkeypatch.setattr(local_edits.cst, "parse_module", lambda text: parsed.append(len(text)) or real(text))
    found = local_fix_edits(source, tree, middle.fix)
    monkeypatch.undo()
    assert found == fix_edits(source, middle.fix) and found
    assert parsed and max(parsed) < 400  # a function of a few lines, not 2,800 lines
