"""The loss the harness records is the user's: before any scaler (issue 37, §3)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.usefixtures("torch_xla_required")


def test_the_loss_is_read_before_the_grad_scaler(run_xlalint, scripts_dir, tmp_path):
    """`scaler.scale(loss).backward()`: backward sees 1024 times the loss; the report
    gives the loss the script computed (its own prints: 3.1823 ... 1.9126)."""
    out = tmp_path / "report.json"
    outcome = run_xlalint(scripts_dir / "scaled_loss.py", fix=False, json_path=out)
    assert outcome.status == 0, outcome.stderr
    run = json.loads(out.read_text())["runs"]["original"]
    assert run["loss"] == pytest.approx([3.1823, 2.7945, 2.4588, 2.1670, 1.9126], rel=1e-3)
    assert run["final_loss"] == pytest.approx(1.9126, rel=1e-3)
