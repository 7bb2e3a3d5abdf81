"""XLA302 dynamic-shape-op on whole scripts (it has no fix)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixes_to
from xlalint.engine.config import Settings
from xlalint.engine.lint import lint_source
from xlalint.rules.xla302_dynamic_shape_op import DynamicShapeOp

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA302"
CODE = "XLA302"

# case -> the (line, column, code) of every finding.
EXPECTED = {
    # Masked loss in a helper the step calls (two mask indexings), `torch.unique` of a
    # masked tensor in the loop (two ops). Not: the every-50-steps accuracy, the step
    # closure, the evaluation loop (no backward).
    "token_classification": [(14, 28, CODE), (14, 44, CODE), (30, 22, CODE), (30, 35, CODE)],
    # A `while` step: one-argument `torch.where`, `.unique()`, a masked store. Not the
    # `print` after the loop.
    "sparse_updates": [(15, 12, CODE), (16, 12, CODE), (17, 5, CODE)],
}


def findings(source: str, path: str = "f.py"):
    return [f for f in lint_source(source, path, Settings(), select=[CODE]) if f.code == CODE]


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    path = FIXTURES / f"{case}.py"
    found = findings(path.read_text(), str(path))
    assert [(f.span.line, f.span.col + 1, f.code) for f in found] == EXPECTED[case]
    assert all(f.fix is None for f in found)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_no_fix_changes_nothing(case):
    path = FIXTURES / f"{case}.py"
    source = path.read_text()
    assert_fixes_to(CODE, source, str(path), source, unsafe=True)


def test_messages_suggest_static_shapes():
    (where, unique, store) = findings((FIXTURES / "sparse_updates.py").read_text())
    assert where.message.startswith("`torch.where(cond)` has a data-dependent output shape")
    assert unique.message.startswith("`.unique()`")
    assert store.message.startswith("Assigning through a boolean mask runs `nonzero` on the CPU")
    # The static-shape alternatives are the explanation's.
    assert "torch.where(cond, a, b)" in DynamicShapeOp.explanation and "masked_fill_" in DynamicShapeOp.explanation


def test_methods_need_a_tensor_receiver():
    source = (
        "import torch\nimport numpy as np\n"
        "for x, y in loader:\n"
        "    x = x.to(device)\n"
        "    idx = np.array(ids).nonzero()\n"
        "    names = df['label'].unique()\n"
        "    loss = model(x).sum()\n"
        "    loss.backward()\n"
        "    picked = x.nonzero()\n"
    )
    assert [(f.span.line, f.message.split("`")[1]) for f in findings(source)] == [(9, ".nonzero()")]


def test_the_assignments_of_a_scope_are_indexed_once_not_walked_per_masked_name(monkeypatch):
    """Issue 39: each masked name (`x[mask]`) walked its whole function for what it is assigned."""
    from xlalint.rules import xla302_dynamic_shape_op as rule

    walks = []
    original = rule.subtree
    monkeypatch.setattr(rule, "subtree", lambda node: walks.append(node) or original(node), raising=False)
    uses = 20
    source = (
        "import torch\n\ndef train(model, opt, loader):\n    for x, y in loader:\n"
        "        out = model(x)\n        mask = y > 0\n        keep = mask\n"
        + "".join(f"        a{i} = out[keep]\n" for i in range(uses))
        + "        out.sum().backward()\n        opt.step()\n"
    )
    assert len(findings(source)) == uses
    assert len(walks) == 1  # the function's assignments, once
