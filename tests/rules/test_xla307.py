"""XLA307 growing-sequence-loop on whole scripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import fixture_positions

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA307"
CODE = "XLA307"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # generate()'s `idx` fed to `self`, and sample()'s `out` fed to `model.forward`; not
    # `history`, which grows too but never reaches the model.
    "sample_gpt": [(27, 19, CODE), (39, 15, CODE)],
    # A batch rebound from the loader (or by `next()`) every iteration, then doubled: no finding.
    "rebound_batches": [],
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    assert fixture_positions(CODE, FIXTURES, case) == EXPECTED[case]
