"""The harness report: text for people (stdout), JSON for programs (``--json FILE``)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from xlalint.harness.results import Cause, RunResult, RuntimeFinding

if TYPE_CHECKING:
    from xlalint.harness.prepare import ScriptVersion, SourceFile
    from xlalint.linter.model import Finding

MAX_CAUSE_SITES = 12
MAX_SHAPE_CHANGES_SHOWN = 5  # inputs listed per recompiling site (all in --json)
_CAUSE_WIDTH = 80


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


# -- JSON -----------------------------------------------------------------------------


def to_json(report: HarnessReport) -> dict:
    from xlalint.linter.reporters import finding_to_json

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
    return record


def write_json(report: HarnessReport, path: Path) -> None:
    path.write_text(json.dumps(to_json(report), indent=2) + "\n", encoding="utf-8")


# -- text -----------------------------------------------------------------------------


def format_text(report: HarnessReport) -> str:
    lines = [f"xlalint run {report.script}: {report.device}, torch_xla {report.torch_xla}"]
    lines.append(f"findings in the script: {_count_codes(report.findings)}")
    if report.local_modules:
        names = ", ".join(module.display_path for module in report.local_modules)
        module_findings = [f for module in report.local_modules for f in module.findings]
        lines.append(f"local modules it imports: {names}; findings in them: {_count_codes(module_findings)}")
    if report.fix_summary:
        lines.append(report.fix_summary)
    for run in report.runs.values():
        lines.append("")
        lines.extend(format_run(run))
    if "original" in report.runs and "fixed" in report.runs:
        lines.append("")
        lines.extend(format_comparison(report.runs["original"], report.runs["fixed"]))
    elif report.comparison_skipped:
        lines.append("")
        lines.append(f"comparison: none: {report.comparison_skipped}")
    if report.working_directory:
        lines.append(f"working directory: {report.working_directory}")
    return "\n".join(lines) + "\n"


def format_run(run: RunResult) -> list[str]:
    lines = [f"{run.description} run: {run.status_line()}, {run.wall_s:.1f} s"]
    lines.extend(f"  warning: {warning}" for warning in run.warnings)
    lines.extend(format_runtime_findings(run.runtime_findings))
    if run.import_error:
        lines.append(f"  torch_xla could not be imported: {run.import_error}")
    if not run.ok and run.stderr_tail:
        lines.append("  last lines of its stderr:")
        lines.extend(f"    {line}" for line in run.stderr_tail.splitlines())
    if run.stdout_tail:
        lines.append("  its output ended with:")
        lines.extend(f"    {line}" for line in run.stdout_tail.splitlines())
    lines.extend(f"  note: {note}" for note in run.leftover_notes())
    lines.extend(f"  note: {note}" for note in run.notes)
    lines.extend(_steps_lines(run))
    metrics = run.metrics
    if metrics is None and run.native:
        lines.append("  metrics: none (plain PyTorch on the GPU: no XLA)")
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
            origin = "   (written by the fix)" if example.from_fix else ""
            lines.append(f"        | {_shorten(example.text, 60)}{origin}")
        lines.extend(_shape_change_lines(example))
    if len(ordered) > MAX_CAUSE_SITES:
        lines.append(f"    ... and {len(ordered) - MAX_CAUSE_SITES} more sites (all in --json)")
    return lines


def _site_text(cause: Cause) -> str:
    if not cause.file:
        return "(no Python frame)"
    if cause.line is None and cause.fixed_line is not None:
        after = f", after line {cause.after_line}" if cause.after_line else ""
        return f"{cause.file} (fixed copy):{cause.fixed_line}{after}"
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
    lines = [f"  optimizer steps  {steps.steps:>7}   ({timing})"]
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


def format_native_comparison(native: RunResult, xla: RunResult) -> list[str]:
    """Plain PyTorch on the GPU against the fixed script on XLA:CUDA: does the port pay?"""
    header = f"{'':24}{'native':>10}{'XLA':>10}{'XLA/native':>14}"
    lines = [f"comparison ({native.description} vs {xla.description} on XLA):", header]
    comparable = not (native.killed or xla.killed)

    def row(label: str, before, after, shown, with_ratio: bool = True) -> str:
        ratio_text = _ratio(after, before) if comparable and with_ratio else ("" if comparable else "n/a")
        return f"{label:24}{shown(before):>10}{shown(after):>10}{ratio_text:>14}"

    lines.append(row("optimizer steps", _steps_value(native, "steps"), _steps_value(xla, "steps"), _cell, False))
    lines.append(
        row(
            "steps/s after warm-up",
            _steps_value(native, "per_second"),
            _steps_value(xla, "per_second"),
            lambda v: "n/a" if v is None else f"{v:.2f}",
        )
    )
    compile_s = xla.metrics.compile_time_s if xla.metrics else None
    lines.append(row("compile time (s)", None, compile_s, _seconds, False))
    lines.append(
        row(
            "peak memory (MiB)",
            _steps_value(native, "peak_memory_bytes"),
            _steps_value(xla, "peak_memory_bytes"),
            _mib,
        )
    )
    lines.append(row("wall time (s)", native.wall_s, xla.wall_s, lambda v: f"{v:.1f}"))
    if not comparable:
        lines.append(
            f"note: no ratios: a run was stopped ({_stopped(native, xla)}), so its numbers cover part of a run"
        )
    elif not (native.ok and xla.ok):
        lines.append("note: a run did not finish cleanly; its numbers cover only what ran")
    return lines


def format_comparison(original: RunResult, fixed: RunResult) -> list[str]:
    if original.native:
        return format_native_comparison(original, fixed)
    header = f"{'':18}{'original':>10}{'fixed':>10}{'original/fixed':>16}"
    lines = [f"comparison ({original.description} vs {fixed.description}):", header]
    # A run stopped from outside did part of the work: a ratio against it means nothing.
    comparable = not (original.killed or fixed.killed)

    def ratio(before, after):
        return _ratio(before, after) if comparable else "n/a"

    for label, name in (
        ("compiles", "compiles"),
        ("cached compiles", "cached_compiles"),
        ("executions", "executions"),
        ("syncs", "syncs"),
        ("host transfers", "host_transfers"),
    ):
        before = getattr(original.metrics, name) if original.metrics else None
        after = getattr(fixed.metrics, name) if fixed.metrics else None
        lines.append(f"{label:18}{_cell(before):>10}{_cell(after):>10}{ratio(before, after):>16}")
    before = original.metrics.compile_time_s if original.metrics else None
    after = fixed.metrics.compile_time_s if fixed.metrics else None
    lines.append(f"{'compile time (s)':18}{_seconds(before):>10}{_seconds(after):>10}{ratio(before, after):>16}")
    # Time per step after warm-up (not steps/s), so that original/fixed reads like the rows above.
    before, after = (_ms_per_step(run) for run in (original, fixed))
    if before is not None or after is not None:
        lines.append(f"{'ms per step':18}{_seconds(before):>10}{_seconds(after):>10}{ratio(before, after):>16}")
    lines.append(
        f"{'wall time (s)':18}{original.wall_s:>10.1f}{fixed.wall_s:>10.1f}{ratio(original.wall_s, fixed.wall_s):>16}"
    )
    if not comparable:
        killed = " and ".join(run.description for run in (original, fixed) if run.killed)
        lines.append(
            f"note: no ratios: the {killed} run was stopped ({_stopped(original, fixed)}), so its numbers cover part of a run"
        )
    elif not (original.ok and fixed.ok):
        lines.append("note: a run did not finish cleanly; its numbers cover only what ran")
    return lines


def _stopped(*runs: RunResult) -> str:
    return "; ".join(run.status_line() for run in runs if run.killed)


def ratio(before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "n/a"
    if after == 0:
        return "=" if before == 0 else "n/a (0)"
    return f"{before / after:.2f}x"


_ratio = ratio


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def _cell(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def _count_codes(findings: list[Finding]) -> str:
    """``3 (XLA102 x2, XLA103 x1)``"""
    if not findings:
        return "none"
    counts = Counter(finding.code for finding in findings)
    return f"{len(findings)} (" + ", ".join(f"{c} x{n}" for c, n in sorted(counts.items())) + ")"


def fix_summary(
    description: str,
    applied: list[Finding],
    left: list[Finding],
    error: str | None,
    *,
    hint_unsafe: bool = False,
    where: str = "",
) -> str:
    """``fixed: fixes applied: 2 (XLA103 x2) in main.py (1), train.py (1); findings left: 0``"""
    if error:
        return f"{description}: the fix failed, so the copy is unchanged: {error}"
    in_files = f" in {where}" if where else ""
    summary = f"{description}: fixes applied: {_count_codes(applied)}{in_files}; findings left: {len(left)}"
    unsafe = [f for f in left if f.fix is not None and f.fix.applicability == "unsafe"]
    if hint_unsafe and unsafe:
        summary += f" ({len(unsafe)} with an unsafe fix: add --unsafe-fixes)"
    return summary


def version_fix_summary(version: ScriptVersion, *, hint_unsafe: bool) -> str:
    """What fixing a version did, over the script and its local modules."""
    files = version.files()
    if len(files) == 1:
        return fix_summary(
            version.description, version.applied, version.findings, version.fix_error, hint_unsafe=hint_unsafe
        )
    applied = [f for file in files for f in file.applied]
    left = [f for file in files for f in file.findings]
    changed = [file for file in files if file.changed]
    where = ", ".join(f"{file.display_path} ({len(file.applied)})" for file in changed)
    summary = fix_summary(version.description, applied, left, None, hint_unsafe=hint_unsafe, where=where)
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
