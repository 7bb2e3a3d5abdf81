"""XLA205 spawn-nprocs on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import (
    assert_fixture_fixes,
    assert_unsafe_fixes_leave_nothing_fixable,
    findings_of,
    fixture_positions,
)
from xlalint.engine.config import Settings
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA205"
CODE = "XLA205"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # A literal (safe) and a flag (unsafe).
    "xrt_spawn": [(17, 42, CODE), (22, 13, CODE)],
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


def test_xrt_targets_are_not_flagged():
    source = "import torch_xla.distributed.xla_multiprocessing as xmp\nxmp.spawn(f, nprocs=8)\n"
    old = Settings(target_version=(1, 13))
    assert [f for f in lint_source(source, "f.py", old, select=[CODE])] == []
    assert len(findings(source, "f.py")) == 1
