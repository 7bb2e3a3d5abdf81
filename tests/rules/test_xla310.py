"""XLA310 fused-optimizer-on-xla on whole scripts: findings, the fix, and the crash it
prevents on torch_xla CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes, expected_fixed, fixture_positions
from rules.xla_runs import run_on_xla_cpu
from xlalint.engine.config import Settings
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA310"
CODE = "XLA310"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # `fused=True`, not `fused=False`.
    "train_fused": [(9, 78, CODE)],
    # The default optim (reported at the call) and the fused one named.
    "hf_args": [(5, 8, CODE), (10, 56, CODE)],
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    assert fixture_positions(CODE, FIXTURES, case) == EXPECTED[case]


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix(case, unsafe):
    assert_fixture_fixes(CODE, FIXTURES, case, unsafe)


def test_the_fused_step_raises_on_xla_and_the_fixed_one_trains(tmp_path):
    pytest.importorskip("torch_xla")
    outcomes = run_on_xla_cpu(
        tmp_path,
        {
            "original.py": (FIXTURES / "train_fused.py").read_text(),
            "fixed.py": expected_fixed(FIXTURES, "train_fused", unsafe=False),
        },
    )
    assert "fused=True" in outcomes["original.py"] and "xla" in outcomes["original.py"], outcomes["original.py"]
    assert outcomes["fixed.py"].startswith("ok: loss "), outcomes["fixed.py"]


def test_transformers_default_is_the_fused_optimizer():
    """What the rule says of transformers: its default (with torch 2.8+) is the fused AdamW.
    In a child process: building the arguments starts accelerate's device (XLA here)."""
    pytest.importorskip("transformers")
    code = (
        "import transformers\n"
        "args = transformers.TrainingArguments(output_dir='unused', report_to=[])\n"
        "print(getattr(args.optim, 'value', args.optim))\n"
    )
    env = {**os.environ, "USE_TORCH_XLA": "0", "CUDA_VISIBLE_DEVICES": ""}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert run.stdout.strip().splitlines()[-1] == "adamw_torch_fused", run.stderr[-2000:]


def test_a_cuda_script_is_reported_after_the_port():
    source = (
        "import torch\nmodel = torch.nn.Linear(4, 4).cuda()\nopt = torch.optim.Adam(model.parameters(), fused=True)\n"
    )
    (finding,) = [f for f in lint_source(source, "t.py", Settings(), select=["ALL"]) if f.code == CODE]
    assert (finding.span.line, finding.after_port) == (3, True)
