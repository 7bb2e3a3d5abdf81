"""The harness for real: scripts run on torch_xla (CPU), metrics and causes checked.

About a minute on two cores: four torch_xla runs, each paying torch's import.
"""

from __future__ import annotations

import json
import shutil

import pytest

from xlalint.harness.report import format_text

pytestmark = pytest.mark.usefixtures("torch_xla_required")

CAUSE_KEYS = {"kind", "cause", "file", "line", "code"}
RUN_KEYS = {
    "exit_code",
    "wall_s",
    "compiles",
    "cached_compiles",
    "executions",
    "syncs",
    "host_transfers",
    "fallback_ops",
    "causes",
    "warnings",
    "native",
    "steps",
    "steps_per_s",
    "peak_memory_bytes",
    "fixed_files",
    "final_loss",
    "leftovers",
    "status",
    "loss",
    "ms_per_step",
    "transfers",
}
RUN_SCHEMA = {
    "type": "object",
    "required": sorted(RUN_KEYS),
    "additionalProperties": False,
    "properties": {
        "exit_code": {"type": ["integer", "null"]},  # null: skipped
        "wall_s": {"type": "number"},
        **{
            name: {"type": ["integer", "null"], "minimum": 0}  # null: no metrics (skipped, no XLA)
            for name in ("compiles", "cached_compiles", "executions", "syncs", "host_transfers")
        },
        "fallback_ops": {"type": "array", "items": {"type": "string"}},
        "causes": {
            "type": "array",
            "items": {
                "type": "object",
                "required": sorted(CAUSE_KEYS),
                "additionalProperties": False,
                "properties": {
                    "kind": {"enum": ["compilation", "execution"]},
                    "cause": {"type": "string"},
                    "file": {"type": ["string", "null"]},
                    "line": {"type": ["integer", "null"]},
                    "code": {"type": ["string", "null"]},
                    "fixed_line": {"type": "integer"},
                    "shape_changes": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["file", "line", "name", "shapes"],
                            "additionalProperties": False,
                            "properties": {
                                "file": {"type": "string"},
                                "line": {"type": ["integer", "null"]},
                                "name": {"type": "string"},
                                "shapes": {
                                    "type": "array",
                                    "minItems": 2,
                                    "items": {"type": "array", "items": {"type": "integer"}},
                                },
                            },
                        },
                    },
                },
            },
        },
        "warnings": {"type": "array", "items": {"type": "string"}},
        "native": {"type": "boolean"},
        "steps": {"type": ["integer", "null"], "minimum": 1},
        "steps_per_s": {"type": ["number", "null"], "exclusiveMinimum": 0},
        "peak_memory_bytes": {"type": ["integer", "null"], "minimum": 0},
        "fixed_files": {"type": "array", "items": {"type": "string"}},
        "final_loss": {"type": ["number", "null"]},
        "leftovers": {
            "type": "object",
            "required": ["killed", "not_killed", "tracked"],
            "additionalProperties": False,
            "properties": {
                "killed": {"type": "array", "items": {"type": "integer"}},
                "not_killed": {"type": "array", "items": {"type": "integer"}},
                "tracked": {"type": "boolean"},
            },
        },
        # Issue 37: each run's status, its user's loss per step, its cost.
        "status": {"enum": ["ok", "failed", "killed", "timeout", "skipped"]},
        "reason": {"type": "string"},  # when not ok: why
        "loss": {"type": "array", "items": {"type": ["number", "null"]}},
        "ms_per_step": {"type": ["number", "null"]},
        "transfers": {"type": ["integer", "null"], "minimum": 0},
        # Only when the run confirmed a silent bug (XLA501, XLA502).
        "runtime_findings": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["code", "file", "line", "message"],
                "additionalProperties": False,
                "properties": {
                    "code": {"type": "string"},
                    "file": {"type": ["string", "null"]},
                    "line": {"type": ["integer", "null"]},
                    "message": {"type": "string"},
                },
            },
        },
    },
}
REPORT_SCHEMA = {
    "type": "object",
    "required": ["script", "device", "torch_xla", "findings", "runs", "local_modules", "verdict"],
    "additionalProperties": False,
    "properties": {
        "script": {"type": "string"},
        "local_modules": {"type": "array", "items": {"type": "string"}},
        "comparison_skipped": {"type": "string"},
        "working_directory": {"type": "string"},
        "fix_diff": {"type": "string"},
        "verdict": {"type": "object", "required": ["text", "cost", "loss"]},
        "device": {"enum": ["CPU", "TPU", "CUDA"]},
        "torch_xla": {"type": "string"},
        "findings": {"type": "array", "items": {"type": "object"}},
        "runs": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"reference": RUN_SCHEMA, "port": RUN_SCHEMA, "fixed": RUN_SCHEMA},
        },
    },
}


@pytest.mark.slow
def test_fixing_dynamic_padding_compiles_fewer_graphs(examples_dir, tmp_path, xlalint_command):
    """`xlalint run --compare --unsafe-fixes --json` of the XLA101 example, through the
    real command line; also checks the JSON report against the SPEC schema."""
    work = tmp_path / "examples"
    shutil.copytree(examples_dir, work)  # the run must leave the user's file unchanged
    script = work / "dynamic_padding.py"
    before = script.read_text()
    report_path = tmp_path / "report.json"
    done = xlalint_command(
        # --steps 0: the whole script (24 steps), not --compare's default 20.
        "run",
        str(script),
        "--compare",
        "--steps",
        "0",
        "--unsafe-fixes",
        "--device",
        "cpu",
        "--json",
        str(report_path),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert script.read_text() == before

    report = json.loads(report_path.read_text())
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(report, REPORT_SCHEMA)
    assert report["script"] == str(script)
    assert report["device"] == "CPU"
    assert [f["code"] for f in report["findings"]] == ["XLA101"]

    # The script imports torch_xla: no plain-CPU reference; the port is the original.
    assert report["runs"]["reference"]["status"] == "skipped"
    original, fixed = report["runs"]["port"], report["runs"]["fixed"]
    assert original["exit_code"] == fixed["exit_code"] == 0
    assert fixed["compiles"] < original["compiles"]
    assert fixed["compiles"] <= 3
    assert original["syncs"] == fixed["syncs"] == 24  # one sync per step either way
    # Every cause is located in the user's script (the fixed copy's path is mapped back).
    for run in (original, fixed):
        assert {(c["file"], c["kind"]) for c in run["causes"]} == {
            (str(script), "compilation"),
            (str(script), "execution"),
        }

    # Recompilations explained: the sync line compiled a graph per new padded length;
    # it is joined to the XLA101 finding, with the inputs whose shape changed.
    lines = before.splitlines()
    sync_line = lines.index("        torch_xla.sync()") + 1
    move_line = next(n for n, text in enumerate(lines, 1) if "input_ids.to(device)" in text)
    at_sync = [c for c in original["causes"] if c["kind"] == "compilation" and c["line"] == sync_line]
    assert len(at_sync) == original["compiles"]
    assert {c["code"] for c in at_sync} == {"XLA101"}
    changes = {change["name"]: change for change in at_sync[0]["shape_changes"]}
    assert sorted(changes) == ["attention_mask", "input_ids"]  # labels keep their shape
    input_ids = changes["input_ids"]
    assert (input_ids["file"], input_ids["line"]) == (str(script), move_line)
    assert len({tuple(shape) for shape in input_ids["shapes"]}) == original["compiles"]
    assert all(shape[0] == 8 for shape in input_ids["shapes"])
    assert f"input_ids moved at {script}:{move_line}: (8, " in done.stdout
    assert "explained by XLA101 at line" in done.stdout
    # Fixed padding: one graph, nothing to explain; both runs did XLA work.
    assert not any("shape_changes" in c for c in fixed["causes"])
    assert original["warnings"] == fixed["warnings"] == []
    # Optimizer steps counted in the child, timed after the warm-up.
    assert original["steps"] == fixed["steps"] == 24
    assert original["steps_per_s"] > 0 and fixed["steps_per_s"] > 0
    assert original["native"] is fixed["native"] is False
    assert "ms per step" in done.stdout

    # The text report: both runs and the side-by-side table.
    assert "comparison (port (the original: nothing to port) vs fixed):" in done.stdout
    assert "compiles" in done.stdout and "fewer, better" in done.stdout
    # The verdict first, and the diff the fix applied (issue 30).
    assert f"fixed vs port: {original['compiles']} -> {fixed['compiles']} compiles, " in done.stdout.splitlines()[0]
    assert "what the fix changed (diff of your file and the fixed copy that ran):" in done.stdout
    assert report["verdict"]["text"] == done.stdout.splitlines()[0]
    assert report["fix_diff"].startswith(f"--- {script}\n+++ {script} (fixed copy)\n")
    assert "running port" in done.stderr  # progress, plain lines when not a terminal


@pytest.mark.slow
def test_item_per_step_is_an_execution_cause_joined_to_xla102(examples_dir, harness_report):
    script = examples_dir / "item_logging.py"
    report = harness_report(script, fix=False, device="cpu")
    run = report.runs["original"]
    assert run.ok, run.stderr_tail
    item_line = next(
        number
        for number, text in enumerate(script.read_text().splitlines(), start=1)
        if text.strip().startswith("print(") and "loss.item()" in text
    )
    at_item = [c for c in run.causes if c.line == item_line and c.kind == "execution"]
    assert len(at_item) == 30  # once per step
    assert {c.code for c in at_item} == {"XLA102"}
    assert {c.file for c in at_item} == {str(script)}
    assert "most likely user code trying to access tensor value" in at_item[0].cause
    assert "XLA102" in {f.code for f in report.findings}
    # Two executions per step: one forced by .item(), one at the sync.
    assert run.metrics.executions == 60
    assert run.metrics.host_transfers == 30


@pytest.mark.slow
def test_launch_of_mp_fn_runs_one_worker_and_compare_runs_it_once(scripts_dir, harness_report):
    """The script has nothing to fix: --compare runs it once (no ratios of a run
    against itself); the metrics come from the spawned worker."""
    script = scripts_dir / "launch_mp_fn.py"
    report = harness_report(script, compare=True, device="cpu")
    assert [run.status for run in report.runs.values()] == ["skipped", "skipped", "ok"]
    assert report.comparison_skipped == (
        "the fixed script is the port (the original: nothing to port) (the fix changed nothing more), so it ran once"
    )
    run = report.runs["fixed"]
    assert run.ok, run.stderr_tail
    assert "world 1 sum 12.0" in run.stdout_tail
    assert run.metrics.syncs == 3  # all in the spawned worker
    sync_line = next(
        number
        for number, text in enumerate(script.read_text().splitlines(), start=1)
        if text.strip() == "torch_xla.sync()"
    )
    syncs = [c for c in run.causes if c.cause == "user torch_xla.sync" and c.kind == "execution"]
    assert [(c.file, c.line) for c in syncs] == [(str(script), sync_line)] * 3
    text = format_text(report)
    assert text.endswith(
        "\ncomparison: none: the fixed script is the port (the original: nothing to port) "
        "(the fix changed nothing more), so it ran once\n"
    )
    assert "port (the original: nothing to port) run: skipped" in text


CUDA_SCRIPT = """\
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = torch.nn.Linear(4, 2).cuda()
total = model(torch.ones(3, 4).to(device)).sum()
print(f"total {total.item():.3f}")
"""


def test_compare_on_a_cuda_script_whose_only_fix_is_the_port_runs_it_once(tmp_path, harness_report):
    """The baseline of a CUDA script is its XLA104 port; when that is the whole fix, the
    fixed script is the baseline and runs once (test_project_runs has both runs)."""
    script = tmp_path / "cuda_train.py"
    script.write_text(CUDA_SCRIPT)
    report = harness_report(script, compare=True, device="cpu")
    assert list(report.runs) == ["reference", "port", "fixed"]
    # The original calls .cuda() unconditionally: it cannot run on the CPU, and says why.
    assert report.runs["reference"].status == "failed"
    assert "cuda_train.py:4" in report.runs["reference"].error
    assert report.runs["port"].status == "skipped"
    assert report.comparison_skipped == (
        "the fixed script is the port (the original with XLA104's safe fixes) (the fix changed nothing more), "
        "so it ran once"
    )
    fixed = report.runs["fixed"]
    assert fixed.ok, fixed.stderr_tail
    assert fixed.metrics.executions >= 1  # it ran on XLA
    baseline_summary = report.fix_summary.splitlines()[0]
    assert baseline_summary.startswith("port (the original with XLA104's safe fixes): fixes applied:")
    assert "XLA104 x" in baseline_summary
    assert script.read_text() == CUDA_SCRIPT


def test_a_run_that_did_nothing_on_xla_is_a_warning(tmp_path, run_xlalint):
    """The script imports torch_xla but computes on the CPU: 0 compilations, 0 executions."""
    script = tmp_path / "cpu_only.py"
    script.write_text("import torch\nimport torch_xla\n\nprint(float(torch.ones(3).sum()))\n")
    report_path = tmp_path / "report.json"
    outcome = run_xlalint(script, fix=False, device="cpu", json_path=report_path)
    assert outcome.status == 0, outcome.stderr
    warning = (
        "no XLA computation ran: 0 compilations and 0 executions: nothing ran on the XLA device; the script "
        "never put a tensor there, so its model and data stayed on the CPU: move them with .to(torch_xla.device())"
    )
    assert f"  warning: {warning}" in outcome.stdout
    assert f"warning: the original run: {warning}" in outcome.stderr
    run = json.loads(report_path.read_text())["runs"]["original"]
    assert run["compiles"] == run["executions"] == 0
    assert run["warnings"] == [warning]


def test_shapes_from_a_device_loader_are_named_after_the_loop_variables(scripts_dir, harness_report):
    script = scripts_dir / "loader_shapes.py"
    report = harness_report(script, fix=False, device="cpu")
    run = report.runs["original"]
    assert run.ok, run.stderr_tail
    assert "total 72.0" in run.stdout_tail
    loop_line = next(
        number for number, text in enumerate(script.read_text().splitlines(), start=1) if "in pl.MpDeviceLoader" in text
    )
    explained = [c for c in run.causes if c.kind == "compilation" and c.shape_changes]
    assert explained, [(c.line, c.cause) for c in run.causes]
    changes = {change.name: change for change in explained[0].shape_changes}
    assert list(changes) == ["features"]  # labels keep their shape
    assert (changes["features"].file, changes["features"].line) == (str(script), loop_line)
    assert changes["features"].shapes == ((2, 3), (2, 5), (2, 3), (2, 7))


# Issue 29: os._exit skips the exit handlers, where the metrics were written: the run
# said "no process of the script imported torch_xla".
ENDS_WITH_OS_EXIT = """\
import os
import torch
import torch_xla

x = torch.ones(3, device=torch_xla.device()) * 2
torch_xla.sync()
print(x.sum().item())
os._exit(0)
"""

# Killed before its exit handlers ran: no metrics, but it did import torch_xla.
KILLS_ITSELF_AFTER_XLA_WORK = ENDS_WITH_OS_EXIT.replace("os._exit(0)", "os.kill(os.getpid(), 9)")


def test_a_script_that_ends_with_os_exit_has_its_metrics(tmp_path, harness_report):
    script = tmp_path / "train.py"
    script.write_text(ENDS_WITH_OS_EXIT)
    [run] = harness_report(script, fix=False).runs.values()
    assert run.exit_code == 0 and run.metrics is not None
    assert run.metrics.executions >= 1 and run.metrics.compiles >= 1
    assert run.warnings == []


def test_a_process_killed_after_importing_torch_xla_is_not_called_one_that_never_did(tmp_path, harness_report):
    script = tmp_path / "train.py"
    script.write_text(KILLS_ITSELF_AFTER_XLA_WORK)
    [run] = harness_report(script, fix=False).runs.values()
    assert run.exit_code == -9 and run.metrics is None
    [note] = run.notes
    assert note.endswith(
        "imported torch_xla but ended before its metrics were written (killed by a signal?): not counted"
    )


# Issue 28 §4: the original and the fixed script ran in one working directory, so the
# fixed run found what the original wrote (it "resumed"; `os.makedirs` failed).
WRITES_STATE = """\
import os

import torch
import torch_xla.core.xla_model as xm


def save(model, path):
    torch.save(model.state_dict(), path)


with open("data.txt") as file:
    data = file.read().strip()
print("resumed" if os.path.exists("state.txt") else "fresh", data)
with open("state.txt", "w") as file:
    file.write("1")
os.makedirs("samples")
"""


@pytest.mark.slow
def test_compare_runs_each_version_in_its_own_copy_of_the_working_directory(tmp_path, harness_report, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "data.txt").write_text("input\n")
    monkeypatch.chdir(work)
    script = tmp_path / "train.py"
    script.write_text(WRITES_STATE)
    report = harness_report(script, compare=True, device="cpu")
    assert list(report.runs) == ["reference", "port", "fixed"]
    assert report.runs["reference"].skipped  # it imports torch_xla
    for run in (report.runs["port"], report.runs["fixed"]):
        assert run.ok, run.stderr_tail
        assert run.stdout_tail.splitlines()[-1] == "fresh input"
    assert sorted(path.name for path in work.iterdir()) == ["data.txt"]  # nothing written into the user's folder
    assert report.working_directory == (
        f"each run had its own copy of the working directory {work}: what one run wrote, the other did not see"
    )
    assert f"working directory: {report.working_directory}\n" in format_text(report)
