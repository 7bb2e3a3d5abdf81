"""The harness report: text for people (stdout), JSON for programs (``--json FILE``)."""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from xlalint.engine.escaping import printable
from xlalint.harness.results import Cause, RunResult, RuntimeFinding
from xlalint.harness.step_chart import step_charts
from xlalint.output import write_report

if TYPE_CHECKING:
    from xlalint.harness.prepare import ScriptVersion, SourceFile
    from xlalint.model import Finding

MAX_CAUSE_SITES = 12
MAX_SHAPE_CHANGES_SHOWN = 5  # inputs listed per recompiling site (all in --json)
_CAUSE_WIDTH = 80


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


class VerdictLike(Protocol):
    """What the report needs of ``verdict.Verdict`` (which builds on this module)."""

    text: str

    def to_json(self) -> dict: ...


class BlameLike(Protocol):
    """What the report needs of ``blame.Blame`` (which builds on this module)."""

    def text(self) -> str: ...

    def to_json(self) -> dict: ...


@dataclass
class HarnessReport:
    script: str  # as given on the command line
    device: str  # "CPU" | "TPU" | "CUDA"
    torch_xla: str | None
    findings: list[Finding]  # of the user's script
    runs: dict[str, RunResult] = field(default_factory=dict)  # "original"/"fixed" -> result
    fix_summary: str | None = None
    #: The script's local modules as they are, with their findings.
    local_modules: list[SourceFile] = field(default_factory=list)
    #: Why --compare ran one version only (the fix changed nothing), if it did.
    comparison_skipped: str | None = None
    #: Where the runs ran, when they were several (each in its own working copy).
    working_directory: str | None = None
    #: What the fix changed: a unified diff of the user's files against the fixed copies.
    fix_diff: str | None = None
    #: The verdict of --compare's three runs (``verdict.Verdict``); None: as ``verdict()`` says.
    verdict: VerdictLike | None = None
    #: The fix --bisect (or --compare, on a crash) found to blame (``blame.Blame``).
    blame: BlameLike | None = None


# -- JSON -----------------------------------------------------------------------------


def to_json(report: HarnessReport) -> dict:
    from xlalint.engine.reporters import finding_to_json

    findings = [*report.findings, *(f for module in report.local_modules for f in module.findings)]
    record = {
        "script": report.script,
        "device": report.device,
        "torch_xla": report.torch_xla,
        # The script's findings, then its local modules' (each with its "filename").
        "findings": [finding_to_json(finding) for finding in findings],
        "runs": {label: run.to_json() for label, run in report.runs.items()},
        "local_modules": [module.display_path for module in report.local_modules],
    }
    if report.comparison_skipped:
        record["comparison_skipped"] = report.comparison_skipped
    if report.working_directory:
        record["working_directory"] = report.working_directory
    if report.fix_diff:
        record["fix_diff"] = report.fix_diff
    record["verdict"] = report.verdict.to_json() if report.verdict else {"text": verdict(report)}
    if report.blame:
        record["blame"] = report.blame.to_json()
    return record


def write_json(report: HarnessReport, path: Path) -> None:
    write_report(path, json.dumps(to_json(report), indent=2) + "\n")  # whole or not at all


# -- text -----------------------------------------------------------------------------


def format_text(report: HarnessReport, *, color: bool = False) -> str:
    """The verdict first, then what was fixed, the comparison and the diff that moved
    it, then each run in detail. ``color``: ANSI colours (a terminal)."""
    paint = Painter(color)
    lines = [paint(report.verdict.text if report.verdict else verdict(report, paint), _BOLD)]
    if report.blame:
        lines.append(report.blame.text())
    lines.append(f"xlalint run {report.script}: {report.device}, torch_xla {report.torch_xla}")
    lines.append(f"findings in the script: {_count_codes(report.findings)}")
    if report.local_modules:
        names = ", ".join(module.display_path for module in report.local_modules)
        # Per file: where the findings are (the script's own may be none).
        module_findings = _count_codes_per_file(
            [(module.display_path, module.findings) for module in report.local_modules]
        )
        lines.append(f"local modules it imports: {names}; findings in them: {module_findings}")
    if report.fix_summary:
        lines.append(report.fix_summary)
    baseline = report.runs.get("port") or report.runs.get("original")
    if baseline is not None and not baseline.skipped and "fixed" in report.runs:
        lines.append("")
        lines.extend(format_comparison(baseline, report.runs["fixed"], paint))
    if "reference" in report.runs:
        lines.append("")
        lines.extend(format_losses(report.runs))
    charts = step_charts(list(report.runs.values()))
    if charts:
        lines.append("")
        lines.extend(charts)
    if report.fix_diff:
        lines.append("")
        lines.extend(format_diff(report.fix_diff, paint))
    for run in report.runs.values():
        lines.append("")
        lines.extend(format_run(run))
    if report.comparison_skipped and not (baseline is not None and not baseline.skipped and "fixed" in report.runs):
        lines.append("")
        lines.append(f"comparison: none: {report.comparison_skipped}")
    if report.working_directory:
        lines.append(f"working directory: {report.working_directory}")
    return "\n".join(lines) + "\n"


# -- the verdict ------------------------------------------------------------------------

ARROW = "->"  # plain ASCII: the report must print on any terminal encoding
#: Final losses closer than this (relative) are "the same".
SAME_LOSS_TOLERANCE = 1e-3


def verdict(report: HarnessReport, paint: Painter | None = None) -> str:
    """One line: did the fixed script do better? Or why that cannot be said (a run
    failed, or was stopped by the timeout)."""
    paint = paint or Painter(False)
    runs = report.runs
    if "original" in runs and "fixed" in runs:
        original, fixed = runs["original"], runs["fixed"]
        if not (original.ok and fixed.ok):
            return "; ".join(outcome(run, other) for run, other in ((original, fixed), (fixed, original)))
        if original.native:
            return f"fixed script on XLA against native CUDA: {changes(original, fixed, paint)}"
        return f"fixed script: {changes(original, fixed, paint)}"
    if not runs:
        return "nothing ran"
    [run] = runs.values()
    once = " (the fix changed nothing, so it ran once)" if report.comparison_skipped else ""
    if not run.ok:
        return outcome(run, None) + once
    return f"{_script_name(run)} ran in {run.wall_s:.1f} s: {totals(run)}{once}"


_NAMES = {"original": "the original", "port": "the port", "reference": "the CPU reference"}


def _script_name(run: RunResult) -> str:
    return _NAMES.get(run.label, "the fixed script")


def outcome(run: RunResult, other: RunResult | None) -> str:
    """``the original did not finish in 200 s`` / ``the fixed one took 17 s``."""
    name = _script_name(run)
    if other is not None and other.label in ("original", "port") and not other.ok and run.ok:
        name = "the fixed one"
    so_far = run.measured_so_far()
    if run.timed_out and so_far:
        return f"{name} was killed at {run.timeout_s:g} s (the timeout) {so_far}"
    if run.timed_out:
        return f"{name} did not finish in {run.timeout_s:g} s (killed by the timeout)"
    if run.signal_name:
        return f"{name} was killed by {run.signal_name} after {run.wall_s:.1f} s" + (f" ({so_far})" if so_far else "")
    if run.exit_code != 0:
        return f"{name} failed (exit status {run.exit_code}) after {run.wall_s:.1f} s"
    return f"{name} took {run.wall_s:.1f} s"


def totals(run: RunResult) -> str:
    parts = []
    if run.metrics is not None:
        parts.append(_plural(run.metrics.compiles, "compile"))
        parts.append(_plural(run.metrics.executions, "execution"))
    ms = _ms_per_step(run)
    if ms is not None:
        parts.append(f"{ms:.1f} ms/step")
    if run.final_loss is not None:
        parts.append(f"final loss {run.final_loss:.4g}")
    return ", ".join(parts) or "no XLA metrics"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def changes(original: RunResult, fixed: RunResult, paint: Painter, *, with_loss: bool = True) -> str:
    """``14 -> 1 compiles, 108.9 -> 1.8 ms/step, same final loss``: compiles and time per
    step always (when measured); executions and host transfers when they changed."""
    parts = []
    for metric in _VERDICT_METRICS:
        before, after = metric.value(original), metric.value(fixed)
        if before is None or after is None or (metric.only_if_changed and before == after):
            continue
        text = f"{metric.shown(before)} {ARROW} {metric.shown(after)} {metric.noun}"
        parts.append(paint(text, _DIRECTION_STYLE[metric.direction(before, after)]))
    if _ms_per_step(original) is None or _ms_per_step(fixed) is None:
        # No time per step to compare (too few steps, or none): the whole run's time.
        parts.append(f"{original.wall_s:.1f} {ARROW} {fixed.wall_s:.1f} s wall time")
    loss = _loss_change(original.final_loss, fixed.final_loss) if with_loss else None
    if loss:
        parts.append(loss)
    return ", ".join(parts)


def _loss_change(before: float | None, after: float | None) -> str | None:
    """Only when both runs trained on a loss the watch could read."""
    if before is None or after is None:
        return None
    if abs(before - after) <= SAME_LOSS_TOLERANCE * max(abs(before), abs(after), 1e-12):
        return f"same final loss ({after:.4g})"
    return f"final loss {before:.4g} {ARROW} {after:.4g}"


# -- directions ---------------------------------------------------------------------------

BETTER, WORSE, NEUTRAL, SAME = "better", "worse", "neutral", "same"


@dataclass(frozen=True)
class _Metric:
    label: str  # in the comparison table
    noun: str  # in the verdict
    value: Callable[[RunResult], float | None]
    #: True: fewer is better; False: more is better; None: neither (a count to read).
    lower_is_better: bool | None
    shown: Callable[[float], str] = str
    fewer: str = "fewer"  # "less" for times
    only_if_changed: bool = False  # in the verdict

    def direction(self, before: float, after: float) -> str:
        if before == after:
            return SAME
        if self.lower_is_better is None:
            return NEUTRAL
        return BETTER if (after < before) == self.lower_is_better else WORSE

    def change(self, before: float | None, after: float | None) -> str:
        """``14.00x fewer, better``; ``2.30x more``; ``same``."""
        if before is None or after is None:
            return "n/a"
        direction = self.direction(before, after)
        if direction == SAME:
            return SAME
        if before == 0 or after == 0:
            amount = f"{self.shown(before)} {ARROW} {self.shown(after)}"
        elif after < before:
            amount = f"{before / after:.2f}x {self.fewer}"
        else:
            amount = f"{after / before:.2f}x more"
        return amount if direction == NEUTRAL else f"{amount}, {direction}"


def _metric_value(name: str) -> Callable[[RunResult], float | None]:
    return lambda run: getattr(run.metrics, name) if run.metrics else None


_COMPILES = _Metric("compiles", "compiles", _metric_value("compiles"), True)
_MS_PER_STEP = _Metric("ms per step", "ms/step", lambda run: _ms_per_step(run), True, _seconds, "less")
_EXECUTIONS = _Metric("executions", "executions", _metric_value("executions"), True, only_if_changed=True)
_HOST_TRANSFERS = _Metric(
    "host transfers", "host transfers", _metric_value("host_transfers"), True, only_if_changed=True
)
_VERDICT_METRICS = (_COMPILES, _MS_PER_STEP, _EXECUTIONS, _HOST_TRANSFERS)
_TABLE_METRICS = (
    _COMPILES,
    # More cache hits is neither good nor bad in itself: the compiles row says that.
    _Metric("cached compiles", "cached compiles", _metric_value("cached_compiles"), None),
    _EXECUTIONS,
    # A fix adds syncs on purpose (XLA103): their number is read, not judged.
    _Metric("syncs", "syncs", _metric_value("syncs"), None),
    _HOST_TRANSFERS,
    _Metric("compile time (s)", "s compiling", _metric_value("compile_time_s"), True, _seconds, "less"),
    # Time per step after warm-up (not steps/s), so that it reads like the rows above.
    _MS_PER_STEP,
    _Metric("wall time (s)", "s wall time", lambda run: run.wall_s, True, _seconds, "less"),
)


# -- colour ---------------------------------------------------------------------------------

_BOLD, _GREEN, _RED, _CYAN = "1", "32", "31", "36"
_DIRECTION_STYLE = {BETTER: _GREEN, WORSE: _RED, NEUTRAL: "", SAME: ""}


class Painter:
    """ANSI colour when asked for (see ``full_format.use_color``), else the text as is."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def __call__(self, text: str, style: str) -> str:
        return f"\033[{style}m{text}\033[0m" if self.color and style and text else text


# -- the diff -------------------------------------------------------------------------------

MAX_DIFF_LINES = 60  # shown in the text report; the whole diff is in --json


def unified_diff(pairs: list[tuple[str, str, str]]) -> str:
    """The fix's diff of each (display path, user's source, fixed source) that changed."""
    chunks = []
    for display_path, before, after in pairs:
        if before == after:
            continue
        chunks.extend(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile=display_path,
                tofile=f"{display_path} (fixed copy)",
            )
        )
    return "".join(line if line.endswith("\n") else line + "\n" for line in chunks)


def format_diff(diff: str, paint: Painter) -> list[str]:
    lines = diff.splitlines()
    shown = ["what the fix changed (diff of your file and the fixed copy that ran):"]
    for line in lines[:MAX_DIFF_LINES]:
        style = ""
        if line.startswith(("+++", "---")):
            style = _BOLD
        elif line.startswith("+"):
            style = _GREEN
        elif line.startswith("-"):
            style = _RED
        elif line.startswith("@@"):
            style = _CYAN
        shown.append("  " + paint(printable(line, keep_tabs=True), style))
    if len(lines) > MAX_DIFF_LINES:
        shown.append(f"  ... and {len(lines) - MAX_DIFF_LINES} more lines of the diff (all in --json: fix_diff)")
    return shown


MAX_LOSS_STEPS_SHOWN = 10


def format_losses(runs: dict[str, RunResult]) -> list[str]:
    """The user's loss per step of each run (before any scaler), side by side."""
    shown = [(label, run) for label, run in runs.items() if run.losses]
    if not shown:
        return ["loss per step: none read"]
    steps = max(len(run.losses) for _label, run in shown)
    lines = [
        "loss per step (the user's loss, before any scaler):",
        f"{'step':>6}" + "".join(f"{label:>12}" for label, _run in shown),
    ]
    for step in range(min(steps, MAX_LOSS_STEPS_SHOWN)):
        cells = [run.losses[step] if step < len(run.losses) else None for _label, run in shown]
        lines.append(f"{step + 1:>6}" + "".join(f"{'-' if v is None else f'{v:.4g}':>12}" for v in cells))
    if steps > MAX_LOSS_STEPS_SHOWN:
        lines.append(f"  ... {steps - MAX_LOSS_STEPS_SHOWN} more steps (all in --json: each run's loss)")
    return lines


def format_run(run: RunResult) -> list[str]:
    if run.skipped:
        return [f"{run.description} run: {run.status_line()}"]
    lines = [f"{run.description} run: {run.status_line()}, {run.wall_s:.1f} s"]
    if run.error:
        lines.append(f"  error: {run.error}")
    lines.extend(f"  warning: {warning}" for warning in run.warnings)
    lines.extend(format_runtime_findings(run.runtime_findings))
    if run.import_error:
        lines.append(f"  torch_xla could not be imported: {printable(run.import_error)}")
    if not run.ok and run.stderr_tail:
        lines.append("  last lines of its stderr:")
        lines.extend(f"    {printable(line, keep_tabs=True)}" for line in run.stderr_tail.splitlines())
    if run.stdout_tail:
        lines.append("  its output ended with:")
        lines.extend(f"    {printable(line, keep_tabs=True)}" for line in run.stdout_tail.splitlines())
    lines.extend(f"  note: {note}" for note in run.leftover_notes())
    lines.extend(f"  note: {note}" for note in run.notes)
    lines.extend(_steps_lines(run))
    metrics = run.metrics
    if metrics is None and run.native:
        where = "the CPU" if run.label == "reference" else "the GPU"
        lines.append(f"  metrics: none (plain PyTorch on {where}: no XLA)")
    elif metrics is None and run.measured_so_far():
        lines.append(f"  metrics: none at exit; measured {run.measured_so_far()} (counters at its latest step)")
    elif metrics is None:
        why = (
            "the process was killed before it could write them"
            if run.timed_out or run.signal_name
            else "no process of the script imported torch_xla and exited normally"
        )
        lines.append(f"  metrics: none ({why})")
    else:
        if metrics.processes > 1:
            lines.append(f"  metrics summed over {metrics.processes} processes")
        lines.extend(
            [
                f"  compiles         {metrics.compiles:>7}   ({metrics.compile_time_s:.1f} s)",
                f"  cached compiles  {metrics.cached_compiles:>7}",
                f"  executions       {metrics.executions:>7}",
                f"  syncs            {metrics.syncs:>7}",
                f"  host transfers   {metrics.host_transfers:>7}",
                f"  fallback ops     {_fallback_ops(metrics.fallback_ops)}",
            ]
        )
    lines.extend(format_causes(run.causes))
    return lines


def format_runtime_findings(findings: list[RuntimeFinding]) -> list[str]:
    """The silent bugs the run showed, at the user's line, with the finding they confirm."""
    if not findings:
        return []
    lines = ["  runtime findings (what the run did; file:line [code]: what happened):"]
    for finding in findings:
        place = f"{finding.file}:{finding.line}" if finding.file and finding.line else finding.file or "(no user frame)"
        if finding.joined == finding.code:
            confirms = f"; confirms the {finding.code} finding on that line"
        elif finding.joined:
            confirms = f"; the finding on that line is {finding.joined}"
        else:
            confirms = "; no finding on that line"
        lines.append(f"    {place} [{finding.code}]: {finding.message}{confirms}")
    return lines


def format_causes(causes: list[Cause]) -> list[str]:
    """Causes grouped by site (file:line) and reason, most frequent first."""
    if not causes:
        return ["  cause sites: none recorded"]
    groups: dict[tuple, Counter] = {}
    examples: dict[tuple, Cause] = {}
    for cause in causes:
        key = (cause.file, cause.line, cause.fixed_line, cause.code, cause.cause)
        groups.setdefault(key, Counter())[cause.kind] += 1
        if cause.shape_changes or key not in examples:
            examples[key] = cause
    ordered = sorted(
        groups.items(),
        key=lambda item: (-sum(item[1].values()), str(item[0][0]), item[0][1] or 0, item[0][2] or 0),
    )
    lines = ["  cause sites (file:line [code]: count kind - cause):"]
    for key, kinds in ordered[:MAX_CAUSE_SITES]:
        _file, _line, _fixed_line, code, text = key
        example = examples[key]
        counts = ", ".join(f"{kinds[kind]} {kind}" for kind in ("compilation", "execution") if kinds[kind])
        lines.append(f"    {_site_text(example)} [{code or '-'}]: {counts} - {_shorten(text)}")
        if example.text:
            origin = ""
            if example.from_fix:
                # Not the user's text at that line: say whose it is.
                origin = "   (inserted by the fix)" if example.line is None else "   (your line as the fix rewrote it)"
            lines.append(f"        | {_shorten(example.text, 60)}{origin}")
        lines.extend(_shape_change_lines(example))
    if len(ordered) > MAX_CAUSE_SITES:
        lines.append(f"    ... and {len(ordered) - MAX_CAUSE_SITES} more sites (all in --json)")
    return lines


def _site_text(cause: Cause) -> str:
    if not cause.file:
        return "(no Python frame)"
    if cause.line is None and cause.fixed_line is not None:
        # A line the fix inserted: no line of the user's file is it, so it is named by
        # the user's line it follows, and by its own line in the fixed copy.
        if cause.after_line:
            return f"{cause.file}, after line {cause.after_line} (line {cause.fixed_line} of the fixed copy)"
        return f"{cause.file} (line {cause.fixed_line} of the fixed copy)"
    return f"{cause.file}:{cause.line}"


def _shape_change_lines(cause: Cause) -> list[str]:
    if not cause.shape_changes:
        return []
    if cause.explained_by:
        why = ", ".join(_finding_place(code, where) for code, where in cause.explained_by)
        header = f"        its graphs differ because input shapes changed (explained by {why}):"
    else:
        header = "        its graphs differ because input shapes changed (no finding explains it):"
    lines = [header]
    for change in cause.shape_changes[:MAX_SHAPE_CHANGES_SHOWN]:
        lines.append(f"          {change.describe()}")
    hidden = len(cause.shape_changes) - MAX_SHAPE_CHANGES_SHOWN
    if hidden > 0:
        lines.append(f"          ... and {hidden} more inputs (all in --json)")
    return lines


def _finding_place(code: str, where: int | str | None) -> str:
    if where is None:
        return code
    return f"{code} at line {where}" if isinstance(where, int) else f"{code} at {where}"


def _steps_lines(run: RunResult) -> list[str]:
    steps = run.steps
    if steps is None:
        return []
    speed = steps.per_second
    timing = (
        f"{speed:.2f} steps/s after the first {steps.warmup_steps + 1}"
        if speed is not None
        else f"too few to time after {steps.warmup_steps + 1} warm-up steps"
    )
    stopped = "; stopped there by --steps" if steps.stopped_at_limit else ""
    lines = [f"  optimizer steps  {steps.steps:>7}   ({timing}{stopped})"]
    if steps.peak_memory_bytes is not None:
        lines.append(f"  peak memory      {_mib(steps.peak_memory_bytes):>7} MiB ({steps.memory_of})")
    return lines


def _ms_per_step(run: RunResult) -> float | None:
    speed = _steps_value(run, "per_second")
    return None if not speed else 1000.0 / speed


def _mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 2**20:.1f}"


def _steps_value(run: RunResult, name: str):
    if run.steps is None:
        return None
    return run.steps.per_second if name == "per_second" else getattr(run.steps, name)


def format_native_comparison(native: RunResult, xla: RunResult, paint: Painter | None = None) -> list[str]:
    """Plain PyTorch on the GPU against the fixed script on XLA:CUDA: does the port pay?
    Each ratio says which way is better for the port."""
    paint = paint or Painter(False)
    header = f"{'':24}{'native':>10}{'XLA':>10}{'XLA/native':>14}"
    lines = [f"comparison ({native.description} vs {xla.description} on XLA):", header]
    comparable = not (native.killed or xla.killed)

    def row(label: str, before, after, shown, lower_is_better: bool | None = None) -> str:
        cells = f"{label:24}{shown(before):>10}{shown(after):>10}"
        if not comparable:
            return f"{cells}{'n/a':>14}"
        if lower_is_better is None:
            return cells
        ratio_text = _ratio(after, before)
        if before is None or after is None or before == after or not ratio_text.endswith("x"):
            return f"{cells}{ratio_text:>14}"
        direction = BETTER if (after < before) == lower_is_better else WORSE
        return f"{cells}{ratio_text:>14}  {paint(direction, _DIRECTION_STYLE[direction])}"

    lines.append(row("optimizer steps", _steps_value(native, "steps"), _steps_value(xla, "steps"), _cell))
    lines.append(
        row(
            "steps/s after warm-up",
            _steps_value(native, "per_second"),
            _steps_value(xla, "per_second"),
            lambda v: "n/a" if v is None else f"{v:.2f}",
            lower_is_better=False,
        )
    )
    compile_s = xla.metrics.compile_time_s if xla.metrics else None
    lines.append(row("compile time (s)", None, compile_s, _seconds))
    lines.append(
        row(
            "peak memory (MiB)",
            _steps_value(native, "peak_memory_bytes"),
            _steps_value(xla, "peak_memory_bytes"),
            _mib,
            lower_is_better=True,
        )
    )
    lines.append(row("wall time (s)", native.wall_s, xla.wall_s, lambda v: f"{v:.1f}", lower_is_better=True))
    if not comparable:
        lines.append(
            f"note: no ratios: a run was stopped ({_stopped(native, xla)}), so its numbers cover part of a run"
        )
    elif not (native.ok and xla.ok):
        lines.append("note: a run did not finish cleanly; its numbers cover only what ran")
    return lines


def format_comparison(original: RunResult, fixed: RunResult, paint: Painter | None = None) -> list[str]:
    """Side by side, each row with how the fixed run changed it: ``14.00x fewer, better``."""
    paint = paint or Painter(False)
    if original.native:
        return format_native_comparison(original, fixed, paint)
    title = f"comparison ({original.description} vs {fixed.description})"
    if original.killed or fixed.killed:
        # A run stopped from outside did part of the work: a table against it would be
        # ratios of nothing (the verdict says what happened).
        killed = " and ".join(run.description for run in (original, fixed) if run.killed)
        return [
            f"{title}: none: the {killed} run was stopped ({_stopped(original, fixed)}), "
            "so its numbers cover part of a run (each run's numbers are below)"
        ]
    if not (original.ok and fixed.ok):
        # No better/worse for a run that failed: its numbers are of a part of a run.
        failed = " and ".join(
            f"the {run.description} run {run.status_line()}" for run in (original, fixed) if not run.ok
        )
        return [f"{title}: none: {failed} (each run's numbers are below)"]
    lines = [f"{title}:", f"{'':18}{original.label:>10}{'fixed':>10}  change"]
    for row in comparison_rows(original, fixed):
        cells = f"{row.label:18}{row.before:>10}{row.after:>10}"
        lines.append(f"{cells}  {paint(row.change, _DIRECTION_STYLE[row.direction])}")
    return lines


@dataclass(frozen=True)
class ComparisonRow:
    label: str
    before: str
    after: str
    change: str  # "14.00x fewer, better" | "2.30x more" | "same" | "n/a"
    direction: str  # BETTER | WORSE | NEUTRAL | SAME


def comparison_rows(original: RunResult, fixed: RunResult) -> list[ComparisonRow]:
    """The comparison of two runs that both ran to their end (not stopped)."""
    rows = []
    for metric in _TABLE_METRICS:
        before, after = metric.value(original), metric.value(fixed)
        if metric is _MS_PER_STEP and before is None and after is None:
            continue
        if before is None or after is None:
            change, direction = "n/a", NEUTRAL
        else:
            change, direction = metric.change(before, after), metric.direction(before, after)
        rows.append(ComparisonRow(metric.label, _shown(metric, before), _shown(metric, after), change, direction))
    return rows


def _shown(metric: _Metric, value: float | None) -> str:
    return "n/a" if value is None else metric.shown(value)


def _stopped(*runs: RunResult) -> str:
    return "; ".join(run.status_line() for run in runs if run.killed)


def ratio(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "n/a"
    if after == 0:
        return "=" if before == 0 else "n/a (0)"
    return f"{before / after:.2f}x"


_ratio = ratio


def _cell(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def _count_codes(findings: list[Finding]) -> str:
    """``3 (XLA102 x2, XLA103 x1)``"""
    if not findings:
        return "none"
    return f"{len(findings)} ({_codes(findings)})"


def _codes(findings: list[Finding]) -> str:
    """``XLA102 x2, XLA103 x1``"""
    counts = Counter(finding.code for finding in findings)
    return ", ".join(f"{c} x{n}" for c, n in sorted(counts.items()))


def _count_codes_per_file(findings_by_file: list[tuple[str, list[Finding]]]) -> str:
    """``3 (main.py: XLA104 x1; model.py: XLA103 x1, XLA502 x1)``: the files with some."""
    counted = [(name, findings) for name, findings in findings_by_file if findings]
    if not counted:
        return "none"
    total = sum(len(findings) for _name, findings in counted)
    return f"{total} (" + "; ".join(f"{name}: {_codes(findings)}" for name, findings in counted) + ")"


def fix_summary(
    description: str,
    applied: list[Finding],
    left: list[Finding],
    error: str | None,
    *,
    hint_unsafe: bool = False,
    applied_text: str | None = None,
) -> str:
    """``fixed: fixes applied: 2 (XLA103 x2); findings left: 0`` (``applied_text``: what
    to say for the fixes applied instead of their count by code)."""
    if error:
        return f"{description}: the fix failed, so the copy is unchanged: {error}"
    applied_text = applied_text or _count_codes(applied)
    summary = f"{description}: fixes applied: {applied_text}; findings left: {len(left)}"
    unsafe = [f for f in left if f.fix is not None and f.fix.applicability == "unsafe"]
    if hint_unsafe and unsafe:
        summary += f" ({len(unsafe)} with an unsafe fix: add --unsafe-fixes)"
    return summary


def version_fix_summary(version: ScriptVersion, *, hint_unsafe: bool) -> str:
    """What fixing a version did, over the script and its local modules: with modules,
    the fixes applied to each file (``fixed: fixes applied: 3 (train.py: XLA104 x2;
    model.py: XLA502 x1); findings left: 0``)."""
    files = version.files()
    if len(files) == 1:
        return fix_summary(
            version.description, version.applied, version.findings, version.fix_error, hint_unsafe=hint_unsafe
        )
    applied = [f for file in files for f in file.applied]
    left = [f for file in files for f in file.findings]
    per_file = _count_codes_per_file([(file.display_path, file.applied) for file in files if file.changed])
    summary = fix_summary(version.description, applied, left, None, hint_unsafe=hint_unsafe, applied_text=per_file)
    failed = [
        f"the fix of {file.display_path} failed, so it runs as it is: {file.fix_error}"
        for file in files
        if file.fix_error
    ]
    return "; ".join([summary, *failed])


def _fallback_ops(ops: dict[str, int]) -> str:
    if not ops:
        return "none"
    return ", ".join(f"{op} x{count}" for op, count in sorted(ops.items()))


def _shorten(text: str, width: int = _CAUSE_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
