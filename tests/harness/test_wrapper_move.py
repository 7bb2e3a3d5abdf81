"""Issue 28: a DDPM-style script whose optimizer is built before the denoiser is moved
inside the diffusion module that holds it, run on torch_xla CPU before and after the fix
(`xlalint run --compare --unsafe-fixes --json`): the original's loss is flat and the run
confirms the XLA501 finding; the fixed script (the wrapper's move above the optimizer)
trains. One torch_xla comparison.
"""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.usefixtures("torch_xla_required")


@pytest.mark.slow
def test_wrapper_move_after_the_optimizer_is_flat_and_trains_once_fixed(scripts_dir, xlalint_command, tmp_path):
    script = scripts_dir / "diffusion_wrapper.py"
    out = tmp_path / "run.json"
    done = xlalint_command(
        "run", str(script), "--compare", "--unsafe-fixes", "--device", "cpu", "--json", str(out), timeout=600
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    original, fixed = record["runs"]["port"], record["runs"]["fixed"]

    [finding] = record["findings"]
    assert (finding["code"], finding["location"]["row"], finding["fix"]["applicability"]) == ("XLA501", 38, "unsafe")
    (runtime,) = original["runtime_findings"]
    assert (runtime["code"], runtime["file"], runtime["line"]) == ("XLA501", str(script), 38)
    assert any(w.startswith("the loss never changed") for w in original["warnings"])
    assert "confirms the XLA501 finding on that line" in done.stdout

    assert "runtime_findings" not in fixed
    assert not any("loss never changed" in w for w in fixed["warnings"])
    assert original["steps"] == fixed["steps"] == 6
    losses = re.findall(r"^\s*loss (\d+\.\d+) -> (\d+\.\d+)$", done.stdout, re.M)
    (first, last), (fixed_first, fixed_last) = ((float(a), float(b)) for a, b in losses)
    assert first == last
    assert fixed_last < 0.9 * fixed_first
