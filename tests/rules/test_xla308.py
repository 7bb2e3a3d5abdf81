"""XLA308 negative-slice-past-length on whole scripts: findings, the fix, and the crash
it prevents on torch_xla CPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support import run_cli

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


def _program(tmp_path: Path, script: str) -> Path:
    """A copy of the program folder (``model.py`` and the sampling scripts) with a
    project root, checked from ``script``."""
    for path in (FIXTURES / "program").glob("*.py"):
        shutil.copy(path, tmp_path / path.name)
    (tmp_path / "pyproject.toml").write_text("")
    return tmp_path / script


def _model_findings(tmp_path: Path, script: str) -> list[tuple[str, int, bool]]:
    """XLA308's findings when ``script`` is checked with the port (XLA104) selected."""
    _program(tmp_path, script)
    run = run_cli("check", "--no-cache", "--select", f"XLA104,{CODE}", "--output-format", "json", script, cwd=tmp_path)
    return [
        (Path(f["filename"]).name, f["location"]["row"], f["fix"] is not None)
        for f in json.loads(run.stdout)
        if f["code"] == CODE
    ]


def test_the_local_module_that_holds_generate_is_checked_as_part_of_the_xla_program(tmp_path):
    assert _model_findings(tmp_path, "sample_xla.py") == [("model.py", 21, True)]


def test_the_local_module_of_a_script_the_port_makes_xla_is_part_of_the_xla_program(tmp_path):
    assert _model_findings(tmp_path, "sample_cuda.py") == [("model.py", 21, True)]


def test_the_local_module_alone_or_of_a_cpu_program_is_not_reported(tmp_path):
    assert _model_findings(tmp_path, "sample_cpu.py") == []
    run = run_cli("check", "--no-cache", "--select", CODE, "model.py", cwd=tmp_path)
    assert run.returncode == 0, run.stdout


def test_fixing_the_xla_script_fixes_the_crop_in_its_local_module(tmp_path):
    script = _program(tmp_path, "sample_xla.py")
    run = run_cli("fix", "--no-cache", "--unsafe-fixes", "--select", CODE, script.name, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    model = (tmp_path / "model.py").read_text()
    # Past 88 columns on one line: laid out as ruff format and black would.
    assert (
        "            idx_cond = (\n"
        "                idx if idx.size(1) <= self.block_size else idx[:, -self.block_size :]\n"
        "            )\n"
    ) in model
    again = run_cli("fix", "--no-cache", "--unsafe-fixes", "--select", CODE, script.name, cwd=tmp_path)
    assert (tmp_path / "model.py").read_text() == model, again.stdout
