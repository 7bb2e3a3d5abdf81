"""The per-step charts of the text report (issue 30 §1): ms per step and compiles so far,
original vs fixed on one scale, in plain ASCII. Built from recorded results: no torch."""

from __future__ import annotations

from xlalint.harness.report import HarnessReport, format_text
from xlalint.harness.results import Metrics, RunResult, Steps
from xlalint.harness.step_chart import WIDTH, step_charts


def _run(label: str, step_ms: list[float | None], step_compiles: list[int | None]) -> RunResult:
    steps = Steps(
        steps=len(step_ms),
        timed_steps=max(0, len(step_ms) - 4),
        timed_seconds=1.0,
        warmup_steps=4,
        step_ms=tuple(step_ms),
        step_compiles=tuple(step_compiles),
    )
    compiles = max((c for c in step_compiles if c is not None), default=0)
    metrics = Metrics(compiles=compiles, cached_compiles=0, executions=1, syncs=1, processes=1)
    return RunResult(label=label, description=label, exit_code=0, wall_s=1.0, metrics=metrics, causes=[], steps=steps)


# The original compiles at every other step (a stall on each), the fixed one once.
ORIGINAL = _run("original", [None, 400.0, 20.0, 400.0, 20.0, 400.0], [1, 2, 2, 3, 3, 4])
FIXED = _run("fixed", [None, 20.0, 20.0, 20.0, 20.0, 20.0], [1, 1, 1, 1, 1, 1])


def test_both_runs_share_one_scale_per_chart():
    assert step_charts([ORIGINAL, FIXED]) == [
        "ms per step, steps 1 to 6 (scale: _ is 0, @ is 400):",
        "  marks, low to high: _ 0, . 44, : 89, - 133, = 178, + 222, * 267, # 311, % 356, @ 400 "
        "(each about the value shown; blank: no value)",
        "  original   @.@.@",  # the first step has no time before it: a blank
        "  fixed      .....",
        "compiles so far, steps 1 to 6 (scale: _ is 0, @ is 4):",
        "  marks, low to high: _ 0, . 0.4, : 0.9, - 1.3, = 1.8, + 2.2, * 2.7, # 3.1, % 3.6, @ 4 "
        "(each about the value shown; blank: no value)",
        "  original  :==##@",
        "  fixed     ::::::",
    ]


def test_long_runs_are_grouped_into_columns_keeping_the_stalls():
    ms = [None] + [10.0] * 299
    ms[150] = 1000.0  # one compile stall in the middle of 300 steps
    run = _run("original", ms, list(range(300)))
    lines = step_charts([run])
    assert lines[0] == "ms per step, steps 1 to 300, 5 steps a column (scale: _ is 0, @ is 1000):"
    row = lines[2].split("  ")[-1].strip()
    assert len(row) == WIDTH
    assert row.count("@") == 1 and row.index("@") == 150 // 5


def test_no_chart_without_recorded_steps():
    no_steps = _run("original", [], [])
    no_steps.steps = None
    assert step_charts([no_steps]) == []
    assert step_charts([_run("fixed", [None], [None])]) == []  # a run without torch_xla


def test_the_text_report_shows_the_charts_after_the_comparison():
    text = format_text(HarnessReport("train.py", "CPU", "2.9.0", [], {"original": ORIGINAL, "fixed": FIXED}))
    lines = text.splitlines()
    assert lines.index("compiles so far, steps 1 to 6 (scale: _ is 0, @ is 4):") > next(
        i for i, line in enumerate(lines) if line.startswith("comparison (original vs fixed)")
    )


def test_the_legend_names_every_mark_a_row_can_have():
    """Issue 41: the legend explained only `_` and `@`; every mark a row uses is in it."""
    from xlalint.harness.step_chart import LEVELS

    lines = step_charts([ORIGINAL, FIXED])
    for title in (0, 4):
        legend = lines[title + 1]
        assert all(f" {mark} " in legend for mark in LEVELS)
        rows = "".join(line[12:] for line in lines[title + 2 : title + 4])
        assert set(rows) - {" "} <= set(LEVELS)
