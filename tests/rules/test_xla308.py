"""XLA308 negative-slice-past-length on whole scripts: findings, the fix, and the crash
it prevents on torch_xla CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from rules.fixture_checks import assert_fixture_fixes, expected_fixed, fixture_positions
from rules.xla_runs import run_on_xla_cpu
from xlalint.engine.config import Settings
from xlalint.engine.fixing import fix_source
from xlalint.engine.lint import lint_source

FIXTURES = Path(__file__).parent.parent / "fixtures" / "XLA308"
CODE = "XLA308"

# case -> the (line, column, code) of every finding, columns 1-based as reported.
EXPECTED = {
    # generate()'s crop; not the slice of a fixed-shape row of the data.
    "lecture_gpt": [(29, 24, CODE)],
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_findings(case):
    assert fixture_positions(CODE, FIXTURES, case) == EXPECTED[case]


@pytest.mark.parametrize("case", sorted(EXPECTED))
@pytest.mark.parametrize("unsafe", [False, True], ids=["safe", "unsafe"])
def test_fix(case, unsafe):
    assert_fixture_fixes(CODE, FIXTURES, case, unsafe)


def test_the_crop_of_a_one_token_prompt_raises_on_xla_and_the_fixed_one_runs(tmp_path):
    pytest.importorskip("torch_xla")
    outcomes = run_on_xla_cpu(
        tmp_path,
        {
            "original.py": (FIXTURES / "lecture_gpt.py").read_text(),
            "fixed.py": expected_fixed(FIXTURES, "lecture_gpt", unsafe=True),
        },
    )
    assert "Value out of range" in outcomes["original.py"]
    assert outcomes["fixed.py"] == "ok: generated 13 tokens"


def test_a_cuda_script_is_reported_after_the_port():
    source = (
        "import torch\n"
        "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "model = torch.nn.Embedding(8, 8).to(device)\n"
        "idx = torch.zeros((1, 1), dtype=torch.long, device=device)\n"
        "for _ in range(10):\n"
        "    logits = model(idx[:, -4:])\n"
        "    idx = torch.cat((idx, logits[:, -1:].argmax(-1)), dim=1)\n"
    )
    (finding,) = [f for f in lint_source(source, "gen.py", Settings(), select=["ALL"]) if f.code == CODE]
    assert (finding.span.line, finding.after_port) == (6, True)
    fixed = fix_source(source, "gen.py", Settings(), unsafe=True).source
    assert "    logits = model(idx if idx.size(1) <= 4 else idx[:, -4:])\n" in fixed
