"""XLA501 optimizer-before-move on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes, expected_fixed, findings_of, fixture_positions

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA501"
CODE = "XLA501"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # A function (safe fix), a class whose move reads `self.device` set in between (no
    # fix), and parameter groups from `named_parameters()` with a scheduler in between (unsafe).
    "classifier": [(22, 17, CODE), (39, 26, CODE), (50, 17, CODE)],
}


def findings(source: str, path: str):
    return findings_of(CODE, source, path)


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    assert fixture_positions(CODE, FIXTURES, case) == EXPECTED[case]


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix(case, unsafe):
    assert_fixture_fixes(CODE, FIXTURES, case, unsafe)


def test_fixed_script_is_clean_where_a_fix_applied():
    fixed = expected_fixed(FIXTURES, "classifier", unsafe=True)
    assert [f.span.line for f in findings(fixed, "f.py")] == [39]  # the class: no fix


def test_fsdp_wrap_after_the_optimizer_gets_no_move_fix():
    """Under torch_xla's FSDP the optimizer belongs after the wrap: moving the `.to` up
    would leave it holding the unsharded parameters."""
    source = (
        "import torch\n"
        "import torch_xla\n"
        "from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP\n"
        "model = Net()\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "model.to(torch_xla.device())\n"
        "model = FSDP(model)\n"
    )
    (finding,) = findings(source, "f.py")
    assert finding.fix is None
    assert "after the FSDP wrap (line 7)" in finding.message
