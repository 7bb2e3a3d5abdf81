"""XLA206 gpu-num-devices on whole scripts: findings, safe and unsafe fixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import (
    assert_fixture_fixes,
    assert_unsafe_fixes_leave_nothing_fixable,
    findings_of,
    fixture_positions,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA206"
CODE = "XLA206"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # A number for GPU_NUM_DEVICES: wrapped in str() (safe).
    "gpu_spawn": [(9, 1, CODE)],
    # PJRT_DEVICE=GPU via setdefault, GPU_NUM_DEVICES only read: reported at the launch, no fix.
    "gpu_no_count": [(15, 5, CODE)],
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


def test_a_count_passed_to_a_subprocess_counts_as_set():
    source = (
        "import os, subprocess\nimport torch_xla\n"
        'os.environ["PJRT_DEVICE"] = "CUDA"\n'
        'subprocess.run(cmd, env={**os.environ, "GPU_NUM_DEVICES": "4"})\n'
        "torch_xla.launch(f)\n"
    )
    assert findings(source, "f.py") == []


def test_tpu_and_unknown_values_are_not_flagged():
    source = (
        "import os\nimport torch_xla\n"
        'os.environ["PJRT_DEVICE"] = "TPU"\n'
        'os.environ["GPU_NUM_DEVICES"] = args.gpus\n'
        'os.environ["GPU_NUM_DEVICES"] = f"{n}"\n'
        "torch_xla.launch(f)\n"
    )
    assert findings(source, "f.py") == []
