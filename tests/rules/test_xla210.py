"""XLA210 spmd-with-processes on whole scripts: findings and the safe fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes, findings_of, fixture_positions
from xlalint.engine.config import Settings
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA210"
CODE = "XLA210"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # A DistributedSampler of world_size() replicas; xm.optimizer_step (safe fix).
    "spmd_train": [(25, 15, CODE), (36, 9, CODE)],
    # An all-reduce of gradients (not the metric's), use_spmd after the device was
    # made, and a launch of one process per device.
    "spmd_launch": [(11, 9, CODE), (20, 5, CODE), (26, 5, CODE)],
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


def test_fsdpv2_optimizer_step_is_left_to_xla209():
    path = Path(__file__).parent.parent / "fixtures" / "XLA209" / "fsdpv2_trainer.py"
    source = path.read_text()
    assert findings(source, str(path)) == []
    assert [f.code for f in lint_source(source, str(path), Settings(), select=["XLA209"])] == ["XLA209"]


def test_use_spmd_first_thing_is_not_reported():
    source = (
        "import torch_xla\nimport torch_xla.runtime as xr\n"
        "def main():\n    xr.use_spmd()\n    model = Net().to(torch_xla.device())\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    assert findings(source, "f.py") == []
