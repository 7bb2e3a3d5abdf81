"""XLA501 optimizer-before-move on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import (
    assert_fixes_to,
    assert_fixture_fixes,
    expected_fixed,
    findings_of,
    fixture_positions,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA501"
CODE = "XLA501"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # A function (safe fix), a class whose move reads `self.device` set in between (no
    # fix), and parameter groups from `named_parameters()` with a scheduler in between (unsafe).
    "classifier": [(22, 17, CODE), (39, 26, CODE), (50, 17, CODE)],
    # Parameter groups, a parameter list kept for clipping, groups taken before the move
    # with the optimizer built after it (all safe: the move goes above the first), groups
    # with the device assigned in between (they and the optimizer go below the move), and
    # groups taken in another block than the move (no fix).
    "param_groups": [(28, 17, CODE), (36, 17, CODE), (49, 17, CODE), (56, 17, CODE), (66, 21, CODE)],
    # Before a move and an FSDP wrap: built after the wrap (safe); with groups chosen by
    # name (unsafe: FSDP renames the parameters); no fix with a scheduler in between or
    # a wrap bound to another name.
    "fsdp_wrap": [(12, 11, CODE), (24, 11, CODE), (33, 11, CODE), (42, 11, CODE)],
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


def test_no_parameters_taken_before_the_move_are_left():
    """Issue 33: the fix moved the `.to` between the groups and the optimizer; the groups
    still held the CPU parameters and the finding was gone."""
    fixed = expected_fixed(FIXTURES, "param_groups", unsafe=True)
    assert [(f.span.line, f.fix) for f in findings(fixed, "f.py")] == [(66, None)]
    assert fixed.index("model = model.to(device)") < fixed.index("groups = [")
    assert fixed.index("model.to(torch_xla.device())") < fixed.index("params = list(model.parameters())")


def test_fsdp_wrap_after_the_optimizer_gets_it_built_after_the_wrap():
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
    assert "after the FSDP wrap (line 7)" in finding.message
    fixed = assert_fixes_to(CODE, source, "f.py", _after_wrap(source), unsafe=False)
    # XLA209's finding on the same optimizer (built before the wrap) is gone too.
    assert not [f for f in findings_of("XLA209", fixed, "f.py")]
    assert not findings(fixed, "f.py")


def _after_wrap(source: str) -> str:
    lines = source.splitlines(keepends=True)
    return "".join([*lines[:4], *lines[5:], lines[4]])


def test_fsdp_fixed_script_keeps_only_the_unfixable_findings():
    fixed = expected_fixed(FIXTURES, "fsdp_wrap", unsafe=True)
    assert [(f.span.line, f.fix) for f in findings(fixed, "f.py")] == [(33, None), (42, None)]
