"""Native CUDA against XLA: steps counted and timed in the child, the side-by-side report.

The report and the JSON are tested with recorded numbers (any machine); the runs on
a GPU are at the end, skipped without an NVIDIA GPU and the PJRT CUDA plugin.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from xlalint.harness import bootstrap, child_steps, prepare
from xlalint.harness.report import HarnessReport, format_text, to_json
from xlalint.harness.results import Metrics, RunResult, Steps
from xlalint.harness.runner import _collect_steps
from xlalint.harness.session import RunOptions, _prepare_versions
from xlalint.install_hint import install_command

REPO = Path(__file__).resolve().parents[2]


def test_the_step_log_times_steps_after_the_warm_up(monkeypatch):
    clock = iter([10.0, 11.0, 12.0, 13.0, 13.5, 14.0, 14.5])
    monkeypatch.setattr(child_steps.time, "perf_counter", lambda: next(clock))
    log = bootstrap.StepLog()
    for _ in range(7):
        log.on_step(object(), (), {})
    record = log.to_json()
    assert record["steps"] == 7
    assert record["warmup_steps"] == bootstrap.WARMUP_STEPS == 3
    # Timed from the end of step 4 to the end of step 7: 3 steps in 1.5 s.
    assert (record["timed_steps"], record["timed_seconds"]) == (3, 1.5)
    assert Steps.from_json(record).per_second == 2.0


def test_too_few_steps_are_not_timed():
    log = bootstrap.StepLog()
    for _ in range(bootstrap.WARMUP_STEPS + 1):
        log.on_step()
    steps = Steps.from_json(log.to_json())
    assert steps.steps == 4 and steps.per_second is None


def test_the_process_with_most_steps_is_the_runs(tmp_path):
    for pid, steps in ((1, 2), (2, 30), (3, 5)):
        record = {"steps": steps, "timed_steps": steps - 4, "timed_seconds": 1.0, "warmup_steps": 3}
        (tmp_path / f"{bootstrap.STEPS_PREFIX}{pid}.json").write_text(json.dumps(record))
    (tmp_path / f"{bootstrap.STEPS_PREFIX}9.json").write_text("{broken")
    assert _collect_steps(tmp_path).steps == 30
    assert _collect_steps(tmp_path / "nothing") is None


def _run(label, description, *, native, steps, per_step_s, peak, compile_s=None, exit_code=0) -> RunResult:
    timed = steps - 4
    return RunResult(
        label=label,
        description=description,
        exit_code=exit_code,
        wall_s=20.0,
        metrics=None if native else Metrics(compiles=2, compile_time_s=compile_s or 0.0, processes=1),
        causes=[],
        native=native,
        steps=Steps(steps, timed, timed * per_step_s, 3, peak, "cuda" if native else "xla"),
    )


NATIVE = _run("original", "original, native CUDA (no XLA)", native=True, steps=104, per_step_s=0.02, peak=800 * 2**20)
XLA = _run("fixed", "fixed", native=False, steps=104, per_step_s=0.0125, peak=600 * 2**20, compile_s=4.2)


def test_native_against_xla_side_by_side():
    report = HarnessReport("train.py", "CUDA", "2.9.0", [], {"original": NATIVE, "fixed": XLA})
    text = format_text(report)
    assert "comparison (original, native CUDA (no XLA) vs fixed on XLA):" in text
    table = text.split("comparison (")[1].splitlines()
    assert table[1].split() == ["native", "XLA", "XLA/native"]
    assert table[2].split() == ["optimizer", "steps", "104", "104"]
    assert table[3].split() == ["steps/s", "after", "warm-up", "50.00", "80.00", "1.60x", "better"]
    assert table[4].split() == ["compile", "time", "(s)", "n/a", "4.2"]
    assert table[5].split() == ["peak", "memory", "(MiB)", "800.0", "600.0", "0.75x", "better"]
    assert table[6].split() == ["wall", "time", "(s)", "20.0", "20.0", "1.00x"]  # equal: no direction
    slower = _run("fixed", "fixed", native=False, steps=104, per_step_s=0.04, peak=900 * 2**20)
    table = format_text(HarnessReport("train.py", "CUDA", "2.9.0", [], {"original": NATIVE, "fixed": slower}))
    rows = table.split("comparison (")[1].splitlines()
    assert rows[3].split()[-2:] == ["0.50x", "worse"] and rows[5].split()[-2:] == ["1.12x", "worse"]
    assert table.startswith("fixed script on XLA against native CUDA: 20.0 -> 40.0 ms/step\n")
    # The native run has no XLA metrics, and that is not a warning.
    assert "metrics: none (plain PyTorch on the GPU: no XLA)" in text
    assert "  optimizer steps      104   (50.00 steps/s after the first 4)" in text
    assert "  peak memory        800.0 MiB (cuda)" in text


def test_native_comparison_in_json():
    runs = to_json(HarnessReport("train.py", "CUDA", "2.9.0", [], {"original": NATIVE, "fixed": XLA}))["runs"]
    assert (runs["original"]["native"], runs["fixed"]["native"]) == (True, False)
    assert runs["original"]["steps_per_s"] == 50.0 and runs["fixed"]["steps_per_s"] == 80.0
    assert runs["original"]["peak_memory_bytes"] == 800 * 2**20
    assert runs["original"]["compiles"] is None


def test_a_stopped_native_run_gets_no_ratios():
    stopped = _run(
        "original", "original, native CUDA (no XLA)", native=True, steps=50, per_step_s=0.02, peak=1, exit_code=-9
    )
    text = format_text(HarnessReport("train.py", "CUDA", "2.9.0", [], {"original": stopped, "fixed": XLA}))
    assert "1.60x" not in text and "x\n" not in text.split("comparison (")[1]
    assert "no ratios: a run was stopped (killed by SIGKILL)" in text


CUDA_SCRIPT = """\
import torch

model = torch.nn.Linear(4, 2).cuda()
"""


def test_on_a_gpu_compare_runs_a_cuda_script_natively_as_the_baseline(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(CUDA_SCRIPT)
    options = RunOptions(script=script, compare=True)
    user_file = prepare.read_user_file(script, str(script), Path(script.name))
    prepared = _prepare_versions(options, user_file, [], tmp_path, native_baseline=True)
    assert [(v.label, v.native, v.description) for v in prepared.versions] == [
        ("original", True, "original, native CUDA (no XLA)"),
        ("fixed", False, "fixed"),
    ]
    assert prepared.versions[0].run_path == script.resolve()  # the user's own file, unchanged
    # Elsewhere: the CPU reference, and the port on XLA: here the whole fix, so it runs once.
    prepared = _prepare_versions(options, user_file, [], tmp_path)
    assert [(v.label, v.native) for v in prepared.versions] == [("reference", True), ("fixed", False)]
    assert prepared.comparison_skipped.startswith("the fixed script is the port (the original with XLA104's")


# -- on a GPU -------------------------------------------------------------------------

needs_gpu = pytest.mark.skipif(
    not (os.path.exists("/dev/nvidia0") and importlib.util.find_spec("xla_plugins.xla_cuda12_pjrt")),
    reason=f"needs an NVIDIA GPU and xla-cuda12-pjrt ({install_command('harness-cuda')})",
)


@needs_gpu
def test_cuda_port_native_against_xla_on_the_gpu(run_xlalint, tmp_path):
    report_path = tmp_path / "report.json"
    outcome = run_xlalint(
        REPO / "examples" / "cuda_port.py", compare=True, unsafe_fixes=True, device="cuda", json_path=report_path
    )
    assert outcome.status == 0, outcome.stderr
    runs = json.loads(report_path.read_text())["runs"]
    assert runs["original"]["native"] and not runs["fixed"]["native"]
    for run in runs.values():
        assert run["steps"] and run["steps_per_s"] and run["peak_memory_bytes"]
    assert runs["fixed"]["compiles"] >= 1
    assert "steps/s after warm-up" in outcome.stdout
    print(outcome.stdout)  # the table for the README (pytest -s)
