"""The text report of `xlalint run` (issue 30 §1): the verdict first, directions on the
comparison, colour, the fix's diff, the default timeout, the final loss. Built from
recorded results: no torch here."""

from __future__ import annotations

import json
import math

import pytest

from xlalint.harness import command, runtime_findings, session
from xlalint.harness.report import HarnessReport, format_text, to_json, unified_diff, verdict
from xlalint.harness.results import Metrics, RunResult, Steps


def _run(label: str, *, compiles: int, ms_per_step: float | None, loss: float | None = None, **fields) -> RunResult:
    steps = None
    if ms_per_step is not None:
        steps = Steps(steps=24, timed_steps=20, timed_seconds=20 * ms_per_step / 1000, warmup_steps=3)
    values = {
        "label": label,
        "description": label,
        "exit_code": 0,
        "wall_s": 8.0,
        "metrics": Metrics(compiles=compiles, cached_compiles=24 - compiles, executions=24, syncs=24, processes=1),
        "causes": [],
        "steps": steps,
        "final_loss": loss,
    }
    return RunResult(**{**values, **fields})


def _report(original: RunResult | None, fixed: RunResult, **fields) -> HarnessReport:
    runs = {"original": original, "fixed": fixed} if original else {"fixed": fixed}
    return HarnessReport("train.py", "CPU", "2.9.0", [], runs, **fields)


ORIGINAL = _run("original", compiles=14, ms_per_step=108.9, loss=0.49991)
FIXED = _run("fixed", compiles=1, ms_per_step=1.8, loss=0.49990, wall_s=5.0)


def test_the_verdict_comes_first_in_one_line():
    text = format_text(_report(ORIGINAL, FIXED))
    first, second = text.splitlines()[:2]
    assert first == "fixed script: 14 -> 1 compiles, 108.9 -> 1.8 ms/step, same final loss (0.4999)"
    assert second == "xlalint run train.py: CPU, torch_xla 2.9.0"
    assert to_json(_report(ORIGINAL, FIXED))["verdict"] == {"text": first}


def test_the_verdict_names_a_different_loss_and_leaves_out_one_not_read():
    changed = _run("fixed", compiles=1, ms_per_step=1.8, loss=0.61)
    assert verdict(_report(ORIGINAL, changed)).endswith(", final loss 0.4999 -> 0.61")
    unread = _run("fixed", compiles=1, ms_per_step=1.8)
    assert "loss" not in verdict(_report(ORIGINAL, unread))


def test_the_verdict_adds_executions_and_transfers_only_when_they_changed():
    fixed = _run("fixed", compiles=1, ms_per_step=1.8)
    fixed.metrics.executions, fixed.metrics.host_transfers = 60, 0
    original = _run("original", compiles=4, ms_per_step=263.5)
    original.metrics.host_transfers = 0
    assert (
        verdict(_report(original, fixed)) == "fixed script: 4 -> 1 compiles, 263.5 -> 1.8 ms/step, 24 -> 60 executions"
    )


def test_a_baseline_killed_by_the_timeout_is_the_verdict_not_a_table_of_na():
    original = _run("original", compiles=3, ms_per_step=None, exit_code=-15, timed_out=True, timeout_s=200, wall_s=200)
    fixed = _run("fixed", compiles=1, ms_per_step=1.8, wall_s=17.2)
    text = format_text(_report(original, fixed))
    assert text.splitlines()[0] == (
        "the original did not finish in 200 s (killed by the timeout); the fixed one took 17.2 s"
    )
    assert "n/a" not in text


def test_a_failed_fixed_run_is_the_verdict():
    fixed = _run("fixed", compiles=1, ms_per_step=None, exit_code=1, wall_s=3.0)
    assert verdict(_report(ORIGINAL, fixed)) == (
        "the original took 8.0 s; the fixed script failed (exit status 1) after 3.0 s"
    )
    alone = _report(None, _run("fixed", compiles=1, ms_per_step=None, exit_code=-9, wall_s=2.0))
    assert verdict(alone) == "the fixed script was killed by SIGKILL after 2.0 s"


def test_a_single_run_says_what_it_did_and_why_it_ran_once():
    report = _report(None, FIXED, comparison_skipped="the fixed script is the original (the fix changed nothing)")
    assert verdict(report) == (
        "the fixed script ran in 5.0 s: 1 compile, 24 executions, 1.8 ms/step, final loss 0.4999 "
        "(the fix changed nothing, so it ran once)"
    )


def test_each_ratio_says_which_way_is_better():
    table = format_text(_report(ORIGINAL, FIXED)).split("comparison (original vs fixed):\n")[1].split("\n\n")[0]
    rows = {line[:18].strip(): line[38:].strip() for line in table.splitlines()[1:]}
    assert rows["compiles"] == "14.00x fewer, better"
    # More cache hits, and the syncs a fix adds, are counts to read, not a regression.
    assert rows["cached compiles"] == "2.30x more"
    assert rows["executions"] == "same"
    assert rows["ms per step"] == "60.50x less, better"
    assert rows["wall time (s)"] == "1.60x less, better"
    slower = _run("fixed", compiles=20, ms_per_step=200.0)
    table = format_text(_report(ORIGINAL, slower))
    assert "1.43x more, worse" in table and "1.84x more, worse" in table


def test_a_count_that_drops_to_zero_has_no_ratio_but_a_direction():
    original = _run("original", compiles=2, ms_per_step=None)
    original.metrics.host_transfers = 3
    text = format_text(_report(original, _run("fixed", compiles=2, ms_per_step=None)))
    assert "host transfers             3         0  3 -> 0, better" in text


def test_colour_only_when_asked_green_better_red_worse():
    slower = _run("fixed", compiles=20, ms_per_step=200.0)
    plain = format_text(_report(ORIGINAL, slower))
    assert "\033[" not in plain
    coloured = format_text(_report(ORIGINAL, FIXED, fix_diff=DIFF), color=True)
    assert "\033[32m14.00x fewer, better\033[0m" in coloured
    assert "\033[1mfixed script: " in coloured
    assert "\033[32m+    pad(batch, max_length=128)\033[0m" in coloured
    assert "\033[31m1.43x more, worse\033[0m" in format_text(_report(ORIGINAL, slower), color=True)


def test_the_cli_decides_colour_as_check_does(monkeypatch):
    """NO_COLOR wins, FORCE_COLOR forces it on a pipe (full_format.use_color)."""

    class Pipe:
        def isatty(self) -> bool:
            return False

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert session.use_color(Pipe())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not session.use_color(Pipe())


USER = "for batch in loader:\n    pad(batch)\n    step(batch)\n"
FIXED_SOURCE = "for batch in loader:\n    pad(batch, max_length=128)\n    step(batch)\n"
DIFF = unified_diff([("train.py", USER, FIXED_SOURCE), ("model.py", "a\n", "a\n")])


def test_the_report_shows_the_diff_the_fix_applied():
    assert DIFF.splitlines()[:2] == ["--- train.py", "+++ train.py (fixed copy)"]
    assert "model.py" not in DIFF  # unchanged files are left out
    report = _report(ORIGINAL, FIXED, fix_diff=DIFF)
    text = format_text(report)
    # Next to the comparison: after the table, before the runs' details.
    assert text.index("fewer, better") < text.index("what the fix changed") < text.index("original run:")
    assert "  -    pad(batch)\n  +    pad(batch, max_length=128)\n" in text
    assert to_json(report)["fix_diff"] == DIFF


def test_a_long_diff_is_cut_in_the_text_and_whole_in_the_json():
    long_fixed = "".join(f"x{n} = {n}\n" for n in range(100))
    diff = unified_diff([("train.py", "", long_fixed)])
    report = _report(ORIGINAL, FIXED, fix_diff=diff)
    text = format_text(report)
    assert "  ... and 43 more lines of the diff (all in --json: fix_diff)" in text
    assert "x99 = 99" not in text and "x99 = 99" in to_json(report)["fix_diff"]


def test_run_has_a_default_timeout_that_help_documents():
    assert session.RunOptions(script=None).timeout_s == session.DEFAULT_TIMEOUT_S == command.DEFAULT_TIMEOUT_S
    from typer.testing import CliRunner

    from xlalint.cli import app

    help_text = " ".join(CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output.split())
    assert "Kill each run after this many seconds; 0: no timeout. The default, 600," in help_text


@pytest.mark.parametrize(("given", "expected"), [("0", None), ("30", 30.0)])
def test_the_timeout_can_be_changed_or_turned_off(given, expected, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from xlalint.cli import app

    seen = []
    monkeypatch.setattr(session, "run", lambda options: seen.append(options.timeout_s) or 0)
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    result = CliRunner().invoke(app, ["run", str(script), "--timeout", given])
    assert result.exit_code == 0, result.output
    assert seen == [expected]
    assert CliRunner().invoke(app, ["run", str(script), "--timeout", "-1"]).exit_code == 2


def _losses(tmp_path, pid: int, calls: int, values: list) -> None:
    record = {"findings": [], "losses": {"backward_calls": calls, "values": values}}
    (tmp_path / f"runtime-{pid}.json").write_text(json.dumps(record))


def test_the_final_loss_is_the_last_one_the_training_process_read(tmp_path):
    assert runtime_findings.final_loss(tmp_path) is None
    _losses(tmp_path, 1, 24, [0.9, 0.8, 0.7, 0.5])
    _losses(tmp_path, 2, 2, [0.3, 0.2])  # another process, fewer backward calls
    assert runtime_findings.final_loss(tmp_path) == 0.5


def test_no_final_loss_when_the_last_was_not_read_or_is_no_number(tmp_path):
    _losses(tmp_path, 1, 24, [0.9, 0.8, 0.7])  # the last one was not computed when read
    assert runtime_findings.final_loss(tmp_path) is None
    _losses(tmp_path, 1, 24, [0.9, 0.8, 0.7, math.nan])
    assert runtime_findings.final_loss(tmp_path) is None
    assert RunResult("fixed", "fixed", 0, 1.0, None, [], final_loss=0.25).to_json()["final_loss"] == 0.25


def test_without_a_time_per_step_the_verdict_compares_wall_times():
    original = _run("original", compiles=3, ms_per_step=None, wall_s=9.0)
    fixed = _run("fixed", compiles=1, ms_per_step=1.5, wall_s=4.5)
    assert verdict(_report(original, fixed)) == "fixed script: 3 -> 1 compiles, 9.0 -> 4.5 s wall time"
