"""XLA309 inference-mode-on-xla on whole scripts: findings, the fix, and the crash it
prevents on torch_xla CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import run_cli

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


def test_the_sampler_in_a_local_module_of_an_xla_script_is_fixed_with_it(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "sampler.py").write_text(
        "import torch\n\n\n@torch.inference_mode()\ndef sample(model, x, steps):\n"
        "    for _ in range(steps):\n        x = model(x)\n    return x\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\nimport torch_xla\nfrom sampler import sample\n\n"
        "model = torch.nn.Linear(4, 4).to(torch_xla.device())\n"
        "print(sample(model, torch.randn(2, 4, device=torch_xla.device()), 3).sum().item())\n"
    )
    alone = run_cli("check", "--no-cache", "--select", CODE, "sampler.py", cwd=tmp_path)
    assert alone.returncode == 0, alone.stdout
    run = run_cli("fix", "--no-cache", "--select", CODE, "train.py", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (tmp_path / "sampler.py").read_text().startswith("import torch\n\n\n@torch.no_grad()\ndef sample(")
