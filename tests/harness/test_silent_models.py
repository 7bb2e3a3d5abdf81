"""Issue 24: the silent model bugs run on torch_xla CPU, before and after their fixes.

XLA501 through the real command line (`xlalint run --compare --unsafe-fixes --json`):
the original run shows the runtime finding and a flat loss, the fixed run trains.
XLA501 again with parameter groups taken before the move (issue 33). XLA502 with a
tiny GPT-2 (built from a config, nothing downloaded): 16 parameters become 17 at the
move, and the fix's `tie_weights()` brings them back to 16.
Four torch_xla runs in all.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.test_runs import REPORT_SCHEMA

pytestmark = pytest.mark.usefixtures("torch_xla_required")


@pytest.mark.slow
def test_optimizer_before_move_is_flat_and_trains_once_fixed(scripts_dir, xlalint_command, tmp_path):
    script = scripts_dir / "optimizer_before_move.py"
    out = tmp_path / "run.json"
    done = xlalint_command(
        "run", str(script), "--compare", "--unsafe-fixes", "--device", "cpu", "--json", str(out), timeout=600
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(record, REPORT_SCHEMA)
    original, fixed = record["runs"]["port"], record["runs"]["fixed"]

    (finding,) = original["runtime_findings"]
    assert (finding["code"], finding["file"], finding["line"]) == ("XLA501", str(script), 11)
    assert "4 of its 4 parameters on the CPU" in finding["message"]
    assert any(w.startswith("the loss never changed") for w in original["warnings"])
    assert "confirms the XLA501 finding on that line" in done.stdout

    assert "runtime_findings" not in fixed
    assert not any("loss never changed" in w for w in fixed["warnings"])
    assert original["steps"] == fixed["steps"] == 6
    # The script prints its first and last loss after the loop.
    losses = re.findall(r"^\s*loss (\d+\.\d+) -> (\d+\.\d+)$", done.stdout, re.M)
    (first, last), (fixed_first, fixed_last) = ((float(a), float(b)) for a, b in losses)
    assert first == last
    assert fixed_last < fixed_first / 2


@pytest.mark.slow
def test_parameter_groups_taken_before_the_move_train_once_fixed(scripts_dir, xlalint_command, tmp_path):
    """Issue 33: the fix put the move between the groups and the optimizer, which then
    still stepped the CPU parameters. Now the move goes above the groups: the loss falls."""
    script = scripts_dir / "optimizer_groups_before_move.py"
    out = tmp_path / "run.json"
    done = xlalint_command(
        "run", str(script), "--compare", "--unsafe-fixes", "--device", "cpu", "--json", str(out), timeout=600
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    original, fixed = record["runs"]["port"], record["runs"]["fixed"]
    [finding] = record["findings"]
    assert (finding["code"], finding["location"]["row"], finding["fix"]["applicability"]) == ("XLA501", 21, "safe")
    (runtime,) = original["runtime_findings"]
    assert (runtime["code"], runtime["line"]) == ("XLA501", 21)
    assert "runtime_findings" not in fixed
    assert not any("loss never changed" in w for w in fixed["warnings"])
    losses = re.findall(r"^\s*loss (\d+\.\d+) -> (\d+\.\d+)$", done.stdout, re.M)
    (first, last), (fixed_first, fixed_last) = ((float(a), float(b)) for a, b in losses)
    assert first == last
    assert fixed_last < fixed_first / 2


@pytest.mark.slow
def test_tied_gpt2_is_untied_by_the_move_and_tied_again_by_the_fix(scripts_dir, harness_report):
    script = scripts_dir / "tied_lm.py"
    report = harness_report(script, compare=True, unsafe_fixes=True, device="cpu")
    original, fixed = report.runs["port"], report.runs["fixed"]
    assert original.ok and fixed.ok, original.stderr_tail + fixed.stderr_tail
    assert [f.code for f in report.findings] == ["XLA502"]

    (finding,) = original.runtime_findings
    assert (finding.code, finding.line, finding.joined) == ("XLA502", 13, "XLA502")
    assert "`transformer.wte.weight` and `lm_head.weight`" in finding.message
    assert "(16 parameters before, 17 after)" in finding.message
    assert "parameters 17 tied False" in original.stdout_tail
    assert "parameters before the move 16" in original.stdout_tail or "16" in finding.message

    assert fixed.runtime_findings == []  # the move still splits them; `tie_weights()` joins them again
    assert "parameters 16 tied True" in fixed.stdout_tail


@pytest.mark.slow
def test_tied_module_of_the_file_stays_tied_once_fixed(harness_report):
    """Issue 33: the tying assignment of a module of the file, repeated after the move by
    the unsafe fix: the fixed run ends with one shared weight, and no runtime finding."""
    script = Path(__file__).resolve().parents[1] / "fixtures" / "XLA502" / "class_tie.py"
    report = harness_report(script, compare=True, unsafe_fixes=True, device="cpu")
    original, fixed = report.runs["port"], report.runs["fixed"]
    assert original.ok and fixed.ok, original.stderr_tail + fixed.stderr_tail
    assert [f.code for f in report.findings] == ["XLA502"]
    (finding,) = original.runtime_findings
    assert (finding.code, finding.line) == ("XLA502", 29)
    assert "parameters 2 tied False" in original.stdout_tail
    assert fixed.runtime_findings == []
    assert "parameters 1 tied True" in fixed.stdout_tail


FALLBACK_PROBE = """
import json
import torch
import torch.nn.functional as F
import torch_xla
import torch_xla.debug.metrics as met

d = torch_xla.device()
x = torch.randn(4, 8).to(d)
i = torch.randint(0, 8, (16,)).to(d)
torch_xla.sync()
calls = {
    "torch.bincount": lambda: torch.bincount(i),
    "torch.histc": lambda: torch.histc(x, bins=4),
    "torch.searchsorted": lambda: torch.searchsorted(torch.sort(x.flatten())[0], x),
    "torch.median": lambda: torch.median(x),
    "torch.fft.rfft": lambda: torch.fft.rfft(x),
    "lowered: F.one_hot(i, 8).sum(0)": lambda: F.one_hot(i, 8).sum(0),
}
seen = {}
for name, call in calls.items():
    before = set(met.executed_fallback_ops())
    result = call()
    torch_xla.sync()
    seen[name] = sorted(set(met.executed_fallback_ops()) - before)
print(json.dumps(seen))
"""


def test_the_fallback_counter_shows_the_listed_ops(tmp_path):
    """XLA304's table against torch_xla itself: each listed op shows up in
    `executed_fallback_ops()` under the aten name the table gives; the suggested
    `one_hot(...).sum(0)` for `bincount` does not."""
    import os
    import subprocess
    import sys

    from xlalint.rules.xla304_cpu_fallback_op import fallback_table

    script = tmp_path / "probe.py"
    script.write_text(FALLBACK_PROBE)
    env = {**os.environ, "PJRT_DEVICE": "CPU"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    table = fallback_table()["fallbacks"]
    for name, ops in seen.items():
        if name.startswith("lowered"):
            assert ops == []
        else:
            assert ops == table[name]["plain"], name
