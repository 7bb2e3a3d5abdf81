"""`xlalint run --steps N`: runs bounded by optimizer steps; a killed run keeps what it
measured up to its latest step."""

from __future__ import annotations

import json

import pytest

from xlalint.harness.report import HarnessReport, format_run, verdict
from xlalint.harness.results import LiveCounters, RunResult
from xlalint.harness.session import DEFAULT_COMPARE_STEPS, RunOptions


def test_compare_defaults_to_20_steps_and_0_means_no_limit(tmp_path):
    script = tmp_path / "s.py"
    assert RunOptions(script=script, compare=True).max_steps == DEFAULT_COMPARE_STEPS == 20
    assert RunOptions(script=script).max_steps is None
    assert RunOptions(script=script, compare=True, steps=0).max_steps is None
    assert RunOptions(script=script, steps=5).max_steps == 5


def _killed_run() -> RunResult:
    return RunResult(
        label="port",
        description="port",
        exit_code=-9,
        wall_s=603.1,
        metrics=None,
        causes=[],
        timed_out=True,
        timeout_s=600,
        live=LiveCounters(steps=6, ms_per_step=142773.1, compiles=16, executions=21),
    )


def test_a_timed_out_run_reports_what_it_measured_up_to_its_latest_step():
    run = _killed_run()
    assert run.status == "timeout"
    assert run.steps_taken == 6
    report = HarnessReport(script="train.py", device="CPU", torch_xla="2.9.0", findings=[], runs={"port": run})
    assert verdict(report).endswith(
        "was killed at 600 s (the timeout) after step 6: 16 compiles, 21 executions, 142.8 s/step"
    )
    text = "\n".join(format_run(run))
    assert "metrics: none (" not in text
    assert "measured after step 6: 16 compiles, 21 executions, 142.8 s/step" in text


@pytest.mark.usefixtures("torch_xla_required")
def test_steps_stops_the_run_after_n_complete_steps(run_xlalint, scripts_dir, tmp_path):
    out = tmp_path / "report.json"
    outcome = run_xlalint(scripts_dir / "steps_loop.py", steps=3, json_path=out)
    assert outcome.status == 0, outcome.stderr
    run = json.loads(out.read_text())["runs"]["fixed"]
    assert run["steps"] == 3
    # Each of the 3 steps ended with its sync: the last step is complete, and its loss read.
    assert run["syncs"] == 3 and run["executions"] == 3
    assert run["final_loss"] is not None
    assert "done 100 steps" not in outcome.stdout + outcome.stderr
    assert "optimizer steps        3   (too few to time after 4 warm-up steps; stopped there by --steps)" in (
        outcome.stdout
    )


@pytest.mark.slow
@pytest.mark.usefixtures("torch_xla_required")
def test_a_run_killed_by_the_timeout_keeps_its_live_counters(harness_report, scripts_dir):
    report = harness_report(scripts_dir / "steps_loop.py", timeout_s=45, script_args=["--sleep", "600"])
    run = report.runs["fixed"]
    assert run.status == "timeout"
    assert run.steps_taken == 2
    assert "after step 2:" in verdict(report)
