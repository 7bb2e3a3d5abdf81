"""XLA201 torch-save on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixes_to, expected_fixed
from xlalint.linter.config import Settings
from xlalint.linter.engine import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA201"
CODE = "XLA201"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # A per-epoch checkpoint (fixed) and a save with `pickle_protocol=` (no fix: xm.save does not take it).
    "checkpoint": [(20, 9, CODE), (25, 9, CODE)],
    # Saves under a rank test and to per-process paths: `master_only=False` keeps the writers; keywords renamed.
    "mp_checkpoint": [(14, 9, CODE), (15, 5, CODE), (18, 9, CODE)],
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
