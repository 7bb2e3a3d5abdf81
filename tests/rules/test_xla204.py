"""XLA204 unsynced-init on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixes_to, expected_fixed
from xlalint.linter.config import Settings
from xlalint.linter.engine import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA204"
CODE = "XLA204"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # Only torch_xla.manual_seed: both models are reported; the broadcast goes after each move to the device.
    "mp_model": [(18, 5, CODE), (20, 5, CODE)],
    # The seed comes after the build; the pretrained encoder is not reported.
    "seeded_late": [(20, 5, CODE)],
    # Issue 24: a new head on a base checkpoint (`num_labels=5`) built before the seed a
    # helper sets, traced through a star-imported AdamW given groups from
    # `named_parameters()` by a helper; the plain pretrained encoder is not reported.
    "hf_finetune": [(25, 5, CODE)],
    # A module-level model shared by forked workers is not reported; a worker's own is.
    "fork_shared": [(15, 5, CODE)],
}


def findings(source: str, path: str):
    return [f for f in lint_source(source, path, Settings(), select=[CODE]) if f.code == CODE]


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    path = FIXTURES / f"{case}.py"
    found = findings(path.read_text(), str(path))
    assert [(f.span.line, f.span.col + 1, f.code) for f in found] == EXPECTED[case]


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix(case, unsafe):
    path = FIXTURES / f"{case}.py"
    assert_fixes_to(CODE, path.read_text(), str(path), expected_fixed(FIXTURES, case, unsafe), unsafe=unsafe)


def test_unsafe_fixes_leave_nothing_fixable():
    for case in EXPECTED:
        fixed = expected_fixed(FIXTURES, case, unsafe=True)
        assert not [f for f in findings(fixed, "f.py") if f.fix is not None]
