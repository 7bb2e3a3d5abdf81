"""XLA201 torch-save on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import (
    assert_fixture_fixes,
    assert_unsafe_fixes_leave_nothing_fixable,
    findings_of,
    fixture_positions,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA201"
CODE = "XLA201"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # A per-epoch checkpoint (fixed) and a save with `pickle_protocol=` (no fix: xm.save does not take it).
    "checkpoint": [(20, 9, CODE), (25, 9, CODE)],
    # Saves under a rank test and to per-process paths: `master_only=False` keeps the writers; keywords renamed.
    "mp_checkpoint": [(14, 9, CODE), (15, 5, CODE), (18, 9, CODE)],
    # A save into an io.BytesIO read back by torch.load: not reported; the file checkpoint is.
    "in_memory": [(24, 1, CODE)],
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


def test_unsafe_fixes_leave_nothing_fixable():
    assert_unsafe_fixes_leave_nothing_fixable(CODE, FIXTURES, EXPECTED)
