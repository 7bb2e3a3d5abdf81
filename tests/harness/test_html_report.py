"""`xlalint run --html FILE` (issue 30 §1): one page with the verdict, the comparison,
per-step charts as inline SVG and the fix's diff. From recorded results: no torch."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from xlalint.harness import session
from xlalint.harness.html_report import line_chart, per_step_charts, to_html, write_html
from xlalint.harness.report import HarnessReport, unified_diff
from xlalint.harness.results import Metrics, RunResult, Steps


def _run(label: str, step_ms: list, compiles: list, **fields) -> RunResult:
    steps = Steps(
        steps=len(step_ms),
        timed_steps=len(step_ms) - 4,
        timed_seconds=sum(step_ms[4:]) / 1000,
        warmup_steps=3,
        step_ms=tuple(step_ms),
        step_compiles=tuple(compiles),
    )
    values = {
        "label": label,
        "description": label,
        "exit_code": 0,
        "wall_s": 5.0,
        "metrics": Metrics(compiles=compiles[-1], executions=len(step_ms), processes=1),
        "causes": [],
        "steps": steps,
    }
    return RunResult(**{**values, **fields})


ORIGINAL = _run("original", [None, 120.0, 100.0, 110.0, 105.0, 98.0], [1, 2, 3, 4, 5, 6])
FIXED = _run("fixed", [None, 2.0, 1.8, 1.9, 1.7, 1.8], [1, 1, 1, 1, 1, 1])
DIFF = unified_diff([("train.py", "pad(b)\n", "pad(b, max_length=128)\n")])
REPORT = HarnessReport("train<1>.py", "CPU", "2.9.0", [], {"original": ORIGINAL, "fixed": FIXED}, fix_diff=DIFF)


def test_the_page_has_the_verdict_table_charts_and_diff_and_nothing_external():
    page = to_html(REPORT)
    assert '<p class="verdict">fixed script: 6 -&gt; 1 compiles, 101.5 -&gt; 1.8 ms/step' in page
    assert '<td class="better">6.00x fewer, better</td>' in page
    assert page.count("<svg ") == 2
    assert '<span class="add">+pad(b, max_length=128)</span>' in page
    assert "train&lt;1&gt;.py" in page and "train<1>.py" not in page  # escaped
    # One file: no scripts, no links, no images to fetch.
    assert not re.search(r"<script|<link|<img|src=|href=", page)


def test_each_chart_has_a_line_per_run_scaled_to_the_largest_value():
    ms_chart, compiles_chart = per_step_charts([ORIGINAL, FIXED])
    svg = ElementTree.fromstring(ms_chart)  # well-formed SVG
    lines = {line.get("class"): line.get("points").split() for line in svg.iter("{http://www.w3.org/2000/svg}polyline")}
    assert set(lines) == {"run-original", "run-fixed"}
    assert len(lines["run-original"]) == 5  # the first step has no time: no point
    ys = [float(point.split(",")[1]) for point in lines["run-original"]]
    assert min(ys) == 12.0  # 120 ms, the largest value, at the top of the plot
    assert ">ms per step<" in ms_chart and ">compiles so far<" in compiles_chart
    assert ">120.0<" in ms_chart and ">6<" in compiles_chart


def test_no_chart_without_steps_and_a_single_point_chart_is_drawn():
    assert per_step_charts([RunResult("fixed", "fixed", 0, 1.0, None, [])]) == []
    chart = line_chart("compiles so far", {"fixed": [1]})
    assert 'points="56.0,12.0"' in chart


def test_the_child_records_each_steps_time_and_compiles_for_the_chart(monkeypatch):
    from xlalint.harness import bootstrap, child_steps

    monkeypatch.delenv(bootstrap.OUT_DIR_ENV, raising=False)
    now = [10.0]
    monkeypatch.setattr(child_steps.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(child_steps, "TIMELINE_STEPS", 3)
    log = bootstrap.StepLog()
    for _ in range(5):
        log.on_step()
        now[0] += 0.25
    record = log.to_json()
    assert record["step_ms"] == [None, 250.0, 250.0]  # the first TIMELINE_STEPS only
    assert record["step_compiles"] == [None, None, None]  # no torch_xla in this process
    assert Steps.from_json(record).step_ms == (None, 250.0, 250.0)


@pytest.mark.parametrize("option", ["json_path", "html_path"])
def test_html_is_written_where_asked_and_never_over_the_script(option, tmp_path):
    path = tmp_path / "report.html"
    write_html(REPORT, path)
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    with pytest.raises(session.UsageError, match=f"--{option.split('_')[0]} .* is the script"):
        session.run_harness(session.RunOptions(script=script, **{option: script}), stderr=None)


def test_the_cli_passes_html_to_the_run(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from xlalint.cli import app

    seen = []
    monkeypatch.setattr(session, "run", lambda options: seen.append(options.html_path) or 0)
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    result = CliRunner().invoke(app, ["run", str(script), "--html", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert seen == [Path(tmp_path / "r.html")]


def test_a_newcomer_reads_the_summary_lines_the_colour_key_and_the_unit():
    """Issue 41: the summary's two lines ran into one paragraph; the charts had no
    colour key and no unit on the y axis."""
    from dataclasses import replace

    page = to_html(replace(REPORT, fix_summary="Found 2 errors (2 fixed, 0 remaining).\n1 unsafe fix available."))
    assert '<p class="summary">Found 2 errors (2 fixed, 0 remaining).</p>' in page
    assert '<p class="summary">1 unsafe fix available.</p>' in page
    ms_chart, compiles_chart = per_step_charts([ORIGINAL, FIXED])
    for chart, unit in ((ms_chart, "ms"), (compiles_chart, "compiles")):
        svg = ElementTree.fromstring(chart)
        ns = "{http://www.w3.org/2000/svg}"
        [axis] = [t for t in svg.iter(f"{ns}text") if t.get("class") == "unit"]
        assert axis.text == unit and axis.get("transform").startswith("rotate(-90")
        keys = {g.find(f"{ns}text").text: g.find(f"{ns}line").get("stroke") for g in svg.iter(f"{ns}g")}
        lines = {p.get("class")[4:]: p.get("stroke") for p in svg.iter(f"{ns}polyline")}
        assert keys == lines == {"original": "#d9534f", "fixed": "#2e8b57"}
