"""Issue 21 item 6: an evaluation loop that carries device state and reads it on every
batch, with no sync, compiles a graph one batch longer at each read. The nanoGPT-style
script goes through `xlalint run --compare --unsafe-fixes --json` on torch_xla (CPU): the
fixed script exits 0, runs on the XLA device, and compiles less than the original.
About a minute on two cores.
"""

from __future__ import annotations

import json
import shutil

import pytest

pytestmark = pytest.mark.usefixtures("torch_xla_required")


@pytest.mark.slow
def test_evaluation_loop_with_a_running_read_compiles_less_once_synced(scripts_dir, tmp_path, run_xlalint):
    script = tmp_path / "eval_loop_state.py"
    shutil.copy(scripts_dir / "eval_loop_state.py", script)
    report_path = tmp_path / "report.json"
    outcome = run_xlalint(script, compare=True, unsafe_fixes=True, device="cpu", json_path=report_path)
    runs = json.loads(report_path.read_text())["runs"]
    original, fixed = runs["port"], runs["fixed"]
    assert original["exit_code"] == 0 and fixed["exit_code"] == 0, outcome.stdout + outcome.stderr
    assert fixed["executions"] > 0  # the work ran on the XLA device
    assert "on xla:0" in outcome.stdout and "eval batch 7: mean loss" in outcome.stdout
    # 8 evaluation batches: the original compiles the running total's graph at each
    # read (10 compiles when measured), the fixed script reuses one (6).
    assert fixed["compiles"] < original["compiles"]
    assert "torch_xla.sync()   (inserted by the fix)" in outcome.stdout
