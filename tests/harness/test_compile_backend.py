"""XLA305 on torch_xla CPU: `torch.compile`'s default backend (Inductor) fails on XLA
tensors; the fixed script, with `backend="openxla"`, trains. One compare run."""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.usefixtures("torch_xla_required")


def test_inductor_fails_on_xla_and_the_openxla_backend_trains(scripts_dir, xlalint_command, tmp_path):
    script = scripts_dir / "compile_backend.py"
    out = tmp_path / "run.json"
    done = xlalint_command(
        "run", str(script), "--compare", "--unsafe-fixes", "--device", "cpu", "--json", str(out), timeout=900
    )
    record = json.loads(out.read_text())
    original, fixed = record["runs"]["port"], record["runs"]["fixed"]
    assert original["exit_code"] != 0
    assert "Inductor" in done.stdout + done.stderr
    assert fixed["exit_code"] == 0, done.stdout[-2000:]
    ((first, last),) = re.findall(r"^\s*loss (\d+\.\d+) -> (\d+\.\d+)$", done.stdout, re.M)
    assert float(last) < float(first)
