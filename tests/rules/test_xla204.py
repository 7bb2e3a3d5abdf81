"""XLA204 unsynced-init on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import (
    assert_fixture_fixes,
    assert_unsafe_fixes_leave_nothing_fixable,
    findings_of,
    fixture_positions,
)

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
    # Call order: the module calls `train` (so its seed is among the seeds), but `train`
    # builds the model before it seeds; `evaluate` seeds first (issue 31).
    "seeded_after_build_called": [(14, 5, CODE)],
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
