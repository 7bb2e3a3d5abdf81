"""Issue 28, done when: the two tied-weight patterns of the ported scripts, as projects
(the tie in `model.py`, the move in `train.py`: llama2.c, pytorch/examples'
word_language_model), and the DDPM-style wrapper moved after its optimizer, train on the
XLA device once `xlalint fix --unsafe-fixes` has fixed them: `xlalint run` (torch_xla
CPU) sees no runtime finding, the loss falls, and the tied weights stay one parameter.
Three torch_xla runs, each a few seconds of training.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest

pytestmark = pytest.mark.usefixtures("torch_xla_required")

SLOW = pytest.mark.slow
CASES = [
    # (the folder copied, or the single script; the finding before the fix; what the
    # script prints about its weights at the end, when they are tied)
    # The two folder programs are slow runs (pytest -m slow); the script is the fast one.
    pytest.param("tied_llama", "train.py", "XLA502", "parameters 5 tied True", id="tied_llama", marks=SLOW),
    pytest.param("tied_word_lm", "train.py", "XLA502", "parameters 6 tied True", id="tied_word_lm", marks=SLOW),
    pytest.param(None, "diffusion_wrapper.py", "XLA501", None, id="diffusion_wrapper.py"),
]


@pytest.mark.parametrize(("folder", "script", "code", "tied"), CASES)
def test_the_fixed_program_trains_on_xla_and_stays_tied(
    scripts_dir, xlalint_command, tmp_path, folder, script, code, tied
):
    program = tmp_path / "program"
    if folder:
        shutil.copytree(scripts_dir / folder, program)
    else:
        program.mkdir()
        shutil.copy(scripts_dir / script, program)
    path = program / script
    modules = {p: p.read_text() for p in program.glob("*.py") if p != path}

    before = xlalint_command("check", str(path), "--no-cache", "--output-format", "json")
    assert [(f["code"], f["filename"]) for f in json.loads(before.stdout)] == [(code, str(path))], before.stderr
    fixed = xlalint_command("fix", "--unsafe-fixes", "--no-cache", str(path))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    # The fix goes into the script; the model's module keeps its tie as it is.
    assert {p: p.read_text() for p in modules} == modules

    out = tmp_path / "run.json"
    done = xlalint_command("run", str(path), "--device", "cpu", "--json", str(out), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(out.read_text())
    assert record["findings"] == []
    (run,) = record["runs"].values()
    assert "runtime_findings" not in run
    assert not any("loss never changed" in w for w in run["warnings"])
    # The report ends with the tail of the script's output: its first and last loss.
    ((first, last),) = re.findall(r"^\s*loss (\d+\.\d+) -> (\d+\.\d+)$", done.stdout, re.M)
    assert float(last) < 0.9 * float(first)
    if tied:
        assert tied in done.stdout
