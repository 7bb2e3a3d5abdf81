"""Per-step charts for the terminal: ms per step and compiles so far, one row per run,
on a scale the runs share, so "original vs fixed" reads at a glance (the same data as
the SVG charts of ``--html``).

Plain ASCII, as the rest of the text report: it prints on any terminal encoding. Each
column is a group of steps (at most :data:`WIDTH` columns): for ms per step the slowest
step of the group (a compile stall stays visible), for compiles the count at its end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xlalint.harness.results import RunResult, Steps

#: Columns of a chart row at most (steps are grouped beyond that).
WIDTH = 60
#: Low to high; a column with no value (the first step has no time) is a space.
LEVELS = "_.:-=+*#%@"

_SERIES: tuple[tuple[str, Callable[[Steps], Sequence[float | int | None]], Callable], ...] = (
    ("ms per step", lambda steps: steps.step_ms, max),
    ("compiles so far", lambda steps: steps.step_compiles, lambda group: group[-1]),
)


def step_charts(runs: Sequence[RunResult]) -> list[str]:
    """The chart lines for the runs that recorded steps; none when no run did."""
    lines: list[str] = []
    for title, series_of, combine in _SERIES:
        series = {run.description: list(series_of(run.steps)) for run in runs if run.steps is not None}
        series = {name: values for name, values in series.items() if any(v is not None for v in values)}
        if not series:
            continue
        steps = max(len(values) for values in series.values())
        top = max(v for values in series.values() for v in values if v is not None)
        per_column = -(-steps // WIDTH)  # ceil: steps grouped into at most WIDTH columns
        grouping = f", {per_column} steps a column" if per_column > 1 else ""
        lines.append(f"{title}, steps 1 to {steps}{grouping} (scale: _ is 0, @ is {_number(top)}):")
        lines.append(legend(top))
        label_width = max(len(name) for name in series)
        for name, values in series.items():
            lines.append(f"  {name:<{label_width}}  {_row(values, per_column, combine, top)}")
    return lines


def legend(top: float) -> str:
    """What each mark stands for, on this chart's scale: mark k of the nine above ``_``
    is a value nearest k/9 of the top (a blank column: no value, as the first step's
    time)."""
    steps = len(LEVELS) - 1
    marks = ", ".join(f"{mark} {_number(top * k / steps)}" for k, mark in enumerate(LEVELS))
    return f"  marks, low to high: {marks} (each about the value shown; blank: no value)"


def _row(values: list[float | int | None], per_column: int, combine: Callable, top: float) -> str:
    marks = []
    for start in range(0, len(values), per_column):
        group = [v for v in values[start : start + per_column] if v is not None]
        marks.append(_mark(combine(group), top) if group else " ")
    return "".join(marks).rstrip()


def _mark(value: float, top: float) -> str:
    if top <= 0 or value <= 0:
        return LEVELS[0]
    # 0 alone is the lowest mark; any positive value is at least the second.
    return LEVELS[max(1, min(len(LEVELS) - 1, round(value / top * (len(LEVELS) - 1))))]


def _number(value: float) -> str:
    return f"{value:.0f}" if value >= 10 or float(value).is_integer() else f"{value:.1f}"
