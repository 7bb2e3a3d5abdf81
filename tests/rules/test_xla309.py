"""XLA309 inference-mode-on-xla on whole scripts: findings, the fix, and the crash it
prevents on torch_xla CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes, expected_fixed, fixture_positions
from rules.xla_runs import run_on_xla_cpu
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA309"
CODE = "XLA309"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # The decorator and the sampling block; not `inference_mode(mode=False)`.
    "sample_denoise": [(11, 2, CODE), (21, 6, CODE)],
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    assert fixture_positions(CODE, FIXTURES, case) == EXPECTED[case]


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix(case, unsafe):
    assert_fixture_fixes(CODE, FIXTURES, case, unsafe)


def test_inference_mode_crashes_on_xla_and_no_grad_runs(tmp_path):
    pytest.importorskip("torch_xla")
    outcomes = run_on_xla_cpu(
        tmp_path,
        {
            "original.py": (FIXTURES / "sample_denoise.py").read_text(),
            "fixed.py": expected_fixed(FIXTURES, "sample_denoise", unsafe=False),
        },
    )
    assert "Cannot set version_counter for inference tensor" in outcomes["original.py"]
    assert outcomes["fixed.py"].startswith("ok: sample "), outcomes["fixed.py"]


def test_a_cuda_script_is_reported_after_the_port():
    source = (
        "import torch\n"
        "device = torch.device('cuda')\n"
        "model = torch.nn.Linear(4, 4).to(device)\n"
        "with torch.inference_mode():\n"
        "    y = model(model(torch.randn(2, 4, device=device)))\n"
    )
    (finding,) = [f for f in lint_source(source, "gen.py", Settings(), select=["ALL"]) if f.code == CODE]
    assert (finding.span.line, finding.after_port) == (4, True)
    fixed = fix_source(source, "gen.py", Settings(), unsafe=True).source
    assert "with torch.no_grad():" in fixed and "torch_xla.device()" in fixed
