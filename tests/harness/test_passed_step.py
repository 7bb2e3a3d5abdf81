"""Issue 38 §1 at run time: a step whose backward runs in a loss scaler passed to the
training function as an argument (DeiT's `train_one_epoch(..., loss_scaler, ...)`).
Without a sync the step is compiled again on every step (`loss.item()` runs the forward
with the unsynced update of the step before it: a longer graph each time, 7 compiles
in 6 steps measured); the fixed script syncs after `loss_scaler(...)` and compiles a fixed set
of graphs, whatever the number of steps. (The DeiT-style corpus script, compared:
16 -> 3 compiles in 8 steps.)"""

from __future__ import annotations

import json
import shutil

import pytest

pytestmark = pytest.mark.usefixtures("torch_xla_required")

STEPS = 6


def test_the_sync_after_a_passed_loss_scaler_stops_the_compiles_growing(run_xlalint, scripts_dir, tmp_path):
    out = tmp_path / "report.json"
    outcome = run_xlalint(scripts_dir / "passed_scaler.py", steps=STEPS, device="cpu", json_path=out)
    assert outcome.status == 0, outcome.stdout + outcome.stderr
    fixed = json.loads(out.read_text())["runs"]["fixed"]
    assert fixed["exit_code"] == 0 and fixed["steps"] == STEPS
    # The forward up to `loss.item()` and the rest of the step, synced after
    # `loss_scaler(...)`: two graphs, compiled once each.
    assert fixed["compiles"] <= 3 and fixed["syncs"] == STEPS
    assert "torch_xla.sync()   (inserted by the fix)" in outcome.stdout


def test_the_scaler_passed_to_an_imported_module_is_synced_there(run_xlalint, scripts_dir, tmp_path):
    """The same program in two modules, as DeiT's: `main.py` builds the scaler and passes
    it to `train_one_epoch` of `engine.py`, which is told so (``analysis/told.py``) and
    fixed as part of the program: the sync goes after `loss_scaler(...)` in `engine.py`."""
    project = tmp_path / "passed_scaler_module"
    shutil.copytree(scripts_dir / "passed_scaler_module", project)
    out = tmp_path / "report.json"
    outcome = run_xlalint(project / "main.py", steps=STEPS, device="cpu", json_path=out)
    assert outcome.status == 0, outcome.stdout + outcome.stderr
    report = json.loads(out.read_text())
    assert report["local_modules"] == [f"{project}/engine.py"]
    fixed = report["runs"]["fixed"]
    assert fixed["exit_code"] == 0 and fixed["steps"] == STEPS
    assert fixed["fixed_files"] == [str(project / "main.py"), str(project / "engine.py")]
    assert fixed["compiles"] <= 3 and fixed["syncs"] == STEPS
    assert "torch_xla.sync()   (inserted by the fix)" in outcome.stdout
