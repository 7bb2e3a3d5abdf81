"""``xlalint run --html FILE``: the report as one HTML page, for a pull request or a
notebook: the verdict, the comparison, per-step charts (ms per step and compiles so
far, original against fixed; inline SVG), the fix's diff and the text report. One
file, no external assets, no script."""

from __future__ import annotations

import html
from pathlib import Path

from xlalint.harness.report import (
    BETTER,
    WORSE,
    HarnessReport,
    comparison_rows,
    format_text,
    verdict,
)
from xlalint.harness.results import RunResult
from xlalint.output import write_report

CHART_WIDTH = 640
CHART_HEIGHT = 180
_MARGIN_LEFT, _MARGIN_BOTTOM, _MARGIN_TOP = 56, 24, 12
_RUN_COLOURS = {"original": "#d9534f", "port": "#d9534f", "reference": "#5b7db1", "fixed": "#2e8b57"}

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; color: #222; }
h1 { font-size: 1.3rem; } h2 { font-size: 1.1rem; margin-top: 1.6rem; }
.verdict { font-size: 1.15rem; font-weight: bold; }
table { border-collapse: collapse; } td, th { padding: 0.2rem 0.8rem; text-align: right; }
td:first-child, th:first-child { text-align: left; }
.better { color: #2e8b57; font-weight: bold; } .worse { color: #c9302c; font-weight: bold; }
pre { background: #f6f8fa; padding: 0.6rem; overflow-x: auto; font-size: 0.85rem; }
.add { color: #22863a; } .del { color: #b31d28; } .hunk { color: #6f42c1; }
svg text { font-size: 11px; fill: #444; }
"""


def write_html(report: HarnessReport, path: Path) -> None:
    write_report(path, to_html(report))  # whole or not at all


def to_html(report: HarnessReport) -> str:
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>xlalint run {_e(report.script)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>xlalint run {_e(report.script)}: {_e(report.device)}, torch_xla {_e(str(report.torch_xla))}</h1>",
        f'<p class="verdict">{_e(report.verdict.text if report.verdict else verdict(report))}</p>',
    ]
    if report.blame:
        parts.append(f"<p>{_e(report.blame.text())}</p>")
    if report.fix_summary:
        # One paragraph a line: HTML would run the summary's lines into one.
        parts.extend(f'<p class="summary">{_e(line)}</p>' for line in report.fix_summary.splitlines() if line.strip())
    original, fixed = report.runs.get("port") or report.runs.get("original"), report.runs.get("fixed")
    if original and fixed and original.ok and fixed.ok and not original.native:
        parts.append(_comparison_table(original, fixed))
    charts = per_step_charts(list(report.runs.values()))
    if charts:
        parts.append("<h2>Per step</h2>")
        parts.extend(charts)
    if report.fix_diff:
        parts.append("<h2>What the fix changed</h2>")
        parts.append(_diff(report.fix_diff))
    parts.append("<h2>The full report</h2>")
    parts.append(f"<pre>{_e(format_text(report))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _comparison_table(original: RunResult, fixed: RunResult) -> str:
    rows = [
        f"<h2>Comparison ({_e(original.description)} vs {_e(fixed.description)})</h2>",
        "<table><tr><th></th><th>original</th><th>fixed</th><th>change</th></tr>",
    ]
    for row in comparison_rows(original, fixed):
        style = {BETTER: ' class="better"', WORSE: ' class="worse"'}.get(row.direction, "")
        rows.append(
            f"<tr><td>{_e(row.label)}</td><td>{_e(row.before)}</td><td>{_e(row.after)}</td>"
            f"<td{style}>{_e(row.change)}</td></tr>"
        )
    rows.append("</table>")
    return "\n".join(rows)


def per_step_charts(runs: list[RunResult]) -> list[str]:
    """An SVG chart each of ms per step and of compiles so far, one line per run (the
    first step has no time: it has no step before it)."""
    charts = []
    for title, unit, series_of in (
        ("ms per step", "ms", lambda steps: steps.step_ms),
        ("compiles so far", "compiles", lambda steps: steps.step_compiles),
    ):
        series = {run.label: list(series_of(run.steps)) for run in runs if run.steps is not None}
        series = {label: values for label, values in series.items() if any(v is not None for v in values)}
        if series:
            charts.append(line_chart(title, series, unit))
    return charts


def line_chart(title: str, series: dict[str, list[float | int | None]], unit: str = "") -> str:
    """A small line chart: x the step (1-based), y from 0 to the largest value, in
    ``unit`` (named along the y axis); a colour key at the top right, a line sample
    and the run's name for each run."""
    steps = max(len(values) for values in series.values())
    top = max((v for values in series.values() for v in values if v is not None), default=0) or 1
    plot_w = CHART_WIDTH - _MARGIN_LEFT - 8
    plot_h = CHART_HEIGHT - _MARGIN_TOP - _MARGIN_BOTTOM

    def x(step: int) -> float:
        return _MARGIN_LEFT + (plot_w * (step - 1) / max(steps - 1, 1))

    def y(value: float) -> float:
        return _MARGIN_TOP + plot_h * (1 - value / top)

    bottom = _MARGIN_TOP + plot_h
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{CHART_WIDTH}" height="{CHART_HEIGHT}" '
        f'role="img" aria-label="{_e(title)}">',
        f"<title>{_e(title)}</title>",
        f'<line x1="{_MARGIN_LEFT}" y1="{bottom}" x2="{CHART_WIDTH - 8}" y2="{bottom}" stroke="#999"/>',
        f'<line x1="{_MARGIN_LEFT}" y1="{_MARGIN_TOP}" x2="{_MARGIN_LEFT}" y2="{bottom}" stroke="#999"/>',
        f'<text x="{_MARGIN_LEFT - 4}" y="{_MARGIN_TOP + 4}" text-anchor="end">{_number(top)}</text>',
        f'<text x="{_MARGIN_LEFT - 4}" y="{bottom}" text-anchor="end">0</text>',
        f'<text x="{_MARGIN_LEFT}" y="{CHART_HEIGHT - 6}">step 1</text>',
        f'<text x="{CHART_WIDTH - 8}" y="{CHART_HEIGHT - 6}" text-anchor="end">step {steps}</text>',
        f'<text x="{_MARGIN_LEFT + plot_w / 2}" y="{CHART_HEIGHT - 6}" text-anchor="middle">{_e(title)}</text>',
    ]
    if unit:
        middle = _MARGIN_TOP + plot_h / 2
        parts.append(
            f'<text class="unit" x="14" y="{middle:.1f}" text-anchor="middle" '
            f'transform="rotate(-90 14 {middle:.1f})">{_e(unit)}</text>'
        )
    for number, (label, values) in enumerate(series.items()):
        colour = _RUN_COLOURS.get(label, "#337ab7")
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values, start=1) if v is not None)
        parts.append(f'<polyline class="run-{_e(label)}" fill="none" stroke="{colour}" points="{points}"/>')
        key_y = _MARGIN_TOP + 12 + 14 * number
        parts.append(
            f'<g class="key"><line x1="{CHART_WIDTH - 96}" y1="{key_y - 4}" x2="{CHART_WIDTH - 76}" '
            f'y2="{key_y - 4}" stroke="{colour}" stroke-width="2"/>'
            f'<text x="{CHART_WIDTH - 72}" y="{key_y}" fill="{colour}">{_e(label)}</text></g>'
        )
    parts.append("</svg>")
    return "\n".join(parts)


def _diff(diff: str) -> str:
    lines = []
    for line in diff.splitlines():
        kind = ""
        if line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+") and not line.startswith("+++"):
            kind = "add"
        elif line.startswith("-") and not line.startswith("---"):
            kind = "del"
        lines.append(f'<span class="{kind}">{_e(line)}</span>' if kind else _e(line))
    return "<pre>" + "\n".join(lines) + "</pre>"


def _number(value: float) -> str:
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def _e(text: str) -> str:
    return html.escape(text, quote=True)
