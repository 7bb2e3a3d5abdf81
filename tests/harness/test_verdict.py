"""The verdict of `--compare`'s three runs (issue 37): the fixed run's cost against the
port, its loss against the CPU reference's, no ratio against a run that failed. Built
from recorded results: no torch here."""

from __future__ import annotations

import json

import pytest

from xlalint.harness.report import HarnessReport, format_text, to_json
from xlalint.harness.results import LiveCounters, Metrics, RunResult, Steps
from xlalint.harness.verdict import LOSS_TOLERANCE, judge, loss_track


def _run(label: str, *, compiles: int = 1, ms: float = 10.0, losses=(), **fields) -> RunResult:
    values = {
        "label": label,
        "description": label,
        "exit_code": 0,
        "wall_s": 8.0,
        "metrics": Metrics(compiles=compiles, executions=20, syncs=20, host_transfers=2, processes=1),
        "causes": [],
        "steps": Steps(steps=20, timed_steps=16, timed_seconds=16 * ms / 1000, warmup_steps=3),
        "losses": list(losses),
    }
    return RunResult(**{**values, **fields})


CPU_LOSS = [4.0 - 0.1 * step for step in range(20)]


def test_the_fixed_run_tracks_the_cpu_loss_and_costs_less_than_the_port():
    runs = {
        "reference": _run("reference", losses=CPU_LOSS, metrics=None),
        "port": _run("port", compiles=14, ms=108.9),
        "fixed": _run("fixed", compiles=1, ms=1.8, losses=[v * 1.001 for v in CPU_LOSS]),
    }
    result = judge(runs)
    # The answer first, then the numbers.
    assert result.text == (
        "faster per step, fewer compiles, same loss: "
        "fixed vs port: 14 -> 1 compiles, 108.9 -> 1.8 ms/step; tracks the CPU loss within 2% over 20 steps"
    )
    record = result.to_json()
    assert record["loss"]["tolerance"] == LOSS_TOLERANCE == 0.02
    assert record["loss"]["tracks"] is True
    assert record["cost"]["compiles"] == [14, 1]
    assert record["cost"]["ms_per_step"] == [108.9, 1.8]


def test_a_fixed_run_that_diverges_names_the_step_and_both_losses():
    fixed = [*CPU_LOSS[:6], 3.58, *CPU_LOSS[7:]]
    track = loss_track(CPU_LOSS, fixed)
    assert track.text() == "diverges from the CPU loss from step 7 (3.58 vs 3.4)"
    # Steps a run could not read (None) are left out of the comparison, not taken as a change.
    assert loss_track([1.0, None, 1.0], [1.0, 5.0, 1.0]).diverges_at is None
    assert loss_track([None], [1.0]) is None


def test_no_ratio_against_a_port_that_was_killed_and_the_reference_that_cannot_run_says_why():
    port = _run(
        "port",
        exit_code=-9,
        timed_out=True,
        timeout_s=600,
        metrics=None,
        steps=None,
        live=LiveCounters(steps=6, ms_per_step=142773.1, compiles=16, executions=21),
    )
    reference = _run("reference", exit_code=1, error="RuntimeError: Found no NVIDIA driver at train.py:56")
    result = judge({"reference": reference, "port": port, "fixed": _run("fixed", losses=CPU_LOSS)})
    assert result.cost is None
    assert "x fewer" not in result.text and "->" not in result.text
    assert "the port was killed at 600 s (the timeout) after step 6: 16 compiles, 21 executions, 142.8 s/step" in (
        result.text
    )
    assert result.text.endswith("the original cannot run on CPU: RuntimeError: Found no NVIDIA driver at train.py:56")


def test_a_port_that_is_the_fixed_script_ran_once_and_is_not_a_failure():
    runs = {
        "reference": _run("reference", losses=CPU_LOSS, metrics=None),
        "port": RunResult.skipped_run("port", "port", "the fixed script is the port (the fix changed nothing more)"),
        "fixed": _run("fixed", compiles=2, losses=CPU_LOSS),
    }
    result = judge(runs)
    assert (
        result.text
        == "fixed script: 2 compiles, 20 executions, 10.0 ms/step; tracks the CPU loss within 2% over 20 steps"
    )
    assert result.cost is None and result.cost_skipped == "the fixed script is the port (the fix changed nothing more)"


def test_the_json_has_the_three_runs_with_status_steps_loss_and_cost():
    runs = {
        "reference": RunResult.skipped_run("reference", "reference", "train.py imports torch_xla itself"),
        "port": _run(
            "port",
            exit_code=-9,
            timed_out=True,
            timeout_s=600,
            metrics=None,
            steps=None,
            live=LiveCounters(steps=6, ms_per_step=1000.0, compiles=16, executions=21, transfers=3),
        ),
        "fixed": _run("fixed", losses=[2.0, None]),
    }
    report = HarnessReport("train.py", "CPU", "2.9.0", [], runs, verdict=judge(runs))
    record = json.loads(json.dumps(to_json(report)))
    assert list(record["runs"]) == ["reference", "port", "fixed"]
    assert record["runs"]["reference"]["status"] == "skipped"
    assert record["runs"]["reference"]["reason"] == "train.py imports torch_xla itself"
    port = record["runs"]["port"]
    assert (port["status"], port["steps"], port["compiles"], port["executions"], port["transfers"]) == (
        "timeout",
        6,
        16,
        21,
        3,
    )
    assert port["ms_per_step"] == 1000.0
    fixed = record["runs"]["fixed"]
    assert (fixed["status"], fixed["loss"], fixed["transfers"]) == ("ok", [2.0, None], 2)
    assert record["verdict"]["loss"] is None
    assert record["verdict"]["loss_skipped"] == "no CPU reference: train.py imports torch_xla itself"
    assert format_text(report).splitlines()[0] == record["verdict"]["text"]


@pytest.mark.slow
@pytest.mark.usefixtures("torch_xla_required")
def test_three_real_runs_and_the_fixed_loss_tracks_the_cpu_reference(run_xlalint, scripts_dir, tmp_path):
    """broken_fix.py with its safe fixes only (the device port and a sync): the original
    trains on the CPU (CUDA hidden), the port on XLA without a sync, the fixed copy with
    one; the fixed loss is the CPU loss at each of the 6 steps."""
    out = tmp_path / "report.json"
    outcome = run_xlalint(scripts_dir / "broken_fix.py", compare=True, steps=6, json_path=out)
    assert outcome.status == 0, outcome.stderr
    record = json.loads(out.read_text())
    runs = record["runs"]
    assert [(label, run["status"], run["steps"]) for label, run in runs.items()] == [
        ("reference", "ok", 6),
        ("port", "ok", 6),
        ("fixed", "ok", 6),
    ]
    assert runs["reference"]["compiles"] is None  # no XLA there
    assert len(runs["reference"]["loss"]) == len(runs["fixed"]["loss"]) == 6
    assert record["verdict"]["loss"]["tracks"] is True
    assert record["verdict"]["text"].endswith("tracks the CPU loss within 2% over 6 steps")
    # Port and fixed, each measured (the fixed run also compiles its partial last batch).
    assert all(isinstance(n, int) and n >= 1 for n in record["verdict"]["cost"]["compiles"])
    assert outcome.stdout.splitlines()[0] == record["verdict"]["text"]


def test_a_failed_run_names_the_users_line_not_the_harness_wrapper(tmp_path):
    """The runtime watch wraps `Module.to`: the error of `.cuda()` passes through it; the
    failure names the user's line, and only the first sentence of a long message."""
    from xlalint.harness.prepare import ScriptVersion
    from xlalint.harness.runner import failure

    script = tmp_path / "train.py"
    script.write_text("import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    stderr = tmp_path / "stderr.txt"
    stderr.write_text(
        "Traceback (most recent call last):\n"
        f'  File "{script}", line 2, in <module>\n'
        "    model = torch.nn.Linear(2, 2).cuda()\n"
        '  File "/tmp/xlalint-run-1/hook/_xlalint_runtime_watch.py", line 73, in to\n'
        "    moved = module_to(module, *args, **kwargs)\n"
        '  File "/usr/lib/python3.11/site-packages/torch/cuda/__init__.py", line 372, in _lazy_init\n'
        "    torch._C._cuda_init()\n"
        "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
        "installed a driver from http://www.nvidia.com/Download/index.aspx\n"
    )
    version = ScriptVersion(run_path=script, source=script.read_text(), findings=[], label="reference")
    assert failure(stderr, version, "train.py") == "RuntimeError: Found no NVIDIA driver on your system. at train.py:2"


def test_the_reference_hides_cuda_and_xla_from_the_libraries_that_pick_a_device():
    """transformers and accelerate choose the XLA device by themselves wherever torch_xla is
    installed: the reference (the original on plain CPU) turns that off, or an HF Trainer
    script's reference runs on XLA (and dies there on the fused AdamW default)."""
    from xlalint.harness import reference

    assert reference.DEVICE.env["CUDA_VISIBLE_DEVICES"] == ""
    assert reference.DEVICE.env["USE_TORCH_XLA"] == "0"
