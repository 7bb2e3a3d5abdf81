"""What the fixes change at run time: `xlalint run --compare --unsafe-fixes --steps 10` on every example.

Each example in examples/ runs as `--compare` runs it (issue 37): the reference (the
original on plain CPU, for the loss), the port (the original with XLA104's safe fixes,
the baseline of the cost), the fixed copy; each bounded by --steps optimizer steps
(default 10) on the chosen device (default CPU). The table gives compilations,
executions, host transfers, compile time and wall time, port -> fixed with the ratio
port/fixed (none when a run was stopped part-way), the loss verdict, and the time the
whole `--compare` took. Then, unless examples are named (or with --bisect SCRIPT), the
time of a `--bisect` on a script whose one unsafe fix breaks it
(tests/harness/scripts/broken_fix.py: the examples' fixes all run): the fix it names,
its trials and their time. It goes to stdout, and to FILE with --output (the table in
the repository, bench/harness_results.md, is rewritten only when named).

    python bench/harness.py [--device cpu] [--timeout 600] [--steps 10] [--bisect SCRIPT]
                            [--output FILE] [EXAMPLE ...]

Wall times include starting Python and importing torch/torch_xla (several seconds per
run) and vary with the machine's load; the counts do not.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import re
import sys
import time
from pathlib import Path

from xlalint.harness.environment import HarnessEnvironmentError
from xlalint.harness.report import ratio
from xlalint.harness.results import RunResult
from xlalint.harness.session import RunOptions, run_harness

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
BROKEN_FIX = REPO / "tests" / "harness" / "scripts" / "broken_fix.py"


def rule_of(script: Path) -> str:
    """The rule an example shows: the first XLAnnn in its docstring."""
    match = re.search(r"XLA\d{3}", script.read_text(encoding="utf-8"))
    return match.group(0) if match else "?"


def compared(original: RunResult, fixed: RunResult, before, after) -> str:
    """``before -> after (before/after)``; no ratio against a run that failed or was stopped."""
    shown = [("n/a" if v is None else f"{v:.1f}" if isinstance(v, float) else str(v)) for v in (before, after)]
    why = ratio(before, after) if original.ok and fixed.ok else "n/a: a run did not finish"
    return f"{shown[0]} -> {shown[1]} ({why})"


def cell(original: RunResult, fixed: RunResult, name: str) -> str:
    before = getattr(original.metrics, name) if original.metrics else None
    after = getattr(fixed.metrics, name) if fixed.metrics else None
    return compared(original, fixed, before, after)


def ms_per_step(run: RunResult) -> float | None:
    speed = run.steps.per_second if run.steps else None
    return 1000.0 / speed if speed else None


def wall_cell(original: RunResult, fixed: RunResult) -> str:
    return compared(original, fixed, original.wall_s, fixed.wall_s)


def write_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("examples", nargs="*", type=Path, help="default: every examples/*.py")
    parser.add_argument("--device", default="cpu", choices=["auto", "cpu", "tpu", "cuda"])
    parser.add_argument("--timeout", type=float, default=600.0, help="per run, in seconds")
    parser.add_argument("--steps", type=int, default=10, help="optimizer steps per run (default 10)")
    parser.add_argument("--bisect", type=Path, metavar="SCRIPT", help="time a --bisect of SCRIPT")
    parser.add_argument("--output", type=Path, metavar="FILE", help="also write the table (markdown) to FILE")
    args = parser.parse_args()
    scripts = args.examples or sorted(EXAMPLES.glob("*.py"))
    bisect_script = args.bisect or (None if args.examples else BROKEN_FIX)

    header = [
        "| example | rule | compiles | executions | host transfers | compile time (s) | ms per step | wall time (s) "
        "| loss against the CPU reference | --compare took (s) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows, failures, device, torch_xla = [], [], "?", "?"
    for script in scripts:
        print(f"bench: {script.name} ...", file=sys.stderr, flush=True)
        options = RunOptions(
            script=script,
            compare=True,
            unsafe_fixes=True,
            device=args.device,
            timeout_s=args.timeout,
            steps=args.steps,
        )
        started = time.monotonic()
        try:
            report = run_harness(options, io.StringIO())
        except HarnessEnvironmentError as error:
            print(f"bench: cannot run {script.name}: {error}", file=sys.stderr)
            return 2
        took = time.monotonic() - started
        device, torch_xla = report.device, report.torch_xla
        fixed = report.runs["fixed"]
        # When the fix changes nothing beyond the port, the harness runs it once: both columns are that run.
        port = report.runs.get("port")
        original = port if port is not None and not port.skipped else report.runs.get("original", fixed)
        for run in {id(r): r for r in (original, fixed)}.values():
            if not run.ok:
                failures.append(f"{script.name} ({run.description}): {run.status_line()}")
        verdict = report.verdict
        loss = (verdict.loss.text() if verdict.loss else verdict.loss_skipped) if verdict else "n/a"
        rows.append(
            f"| {script.name} | {rule_of(script)} | {cell(original, fixed, 'compiles')} "
            f"| {cell(original, fixed, 'executions')} | {cell(original, fixed, 'host_transfers')} "
            f"| {cell(original, fixed, 'compile_time_s')} "
            f"| {compared(original, fixed, ms_per_step(original), ms_per_step(fixed))} | {wall_cell(original, fixed)} "
            f"| {(loss or 'n/a').replace('|', '/')} | {took:.1f} |"
        )
    bisect_lines = []
    if bisect_script is not None:
        print(f"bench: --bisect {bisect_script.name} ...", file=sys.stderr, flush=True)
        options = RunOptions(
            script=bisect_script,
            bisect=True,
            unsafe_fixes=True,
            device=args.device,
            timeout_s=args.timeout,
            steps=args.steps,
        )
        started = time.monotonic()
        report = run_harness(options, io.StringIO())
        took = time.monotonic() - started
        blame = report.blame
        bisect_lines = [
            "",
            f"`xlalint run --bisect --unsafe-fixes --steps {args.steps}` of {bisect_script.name}: {took:.1f} s in all "
            "(the three runs, then the trials).",
            "",
            f"    {blame.text() if blame else 'no blame: the fixed run did not crash or diverge'}",
        ]
        if blame is None or not blame.fixes:
            failures.append(f"{bisect_script.name}: bisect named no fix")

    lines = [
        "# xlalint run --compare --unsafe-fixes on the examples",
        "",
        f"Device {device}, torch_xla {torch_xla}, Python {platform.python_version()}, "
        f"{platform.machine()}. Each run stops after {args.steps} optimizer steps. Cells: port -> fixed "
        "(port/fixed); the port is the original with XLA104's safe fixes (the original itself for a script "
        "with nothing to port). "
        + (
            "For cuda_port.py the original runs natively on the GPU (plain PyTorch, no XLA metrics). "
            if device == "CUDA"
            else ""
        )
        + "ms per step: after the first 4 optimizer steps. Wall time includes Python start-up and importing torch_xla; "
        "--compare took: the three runs (reference, port, fixed) of the example.",
        "",
        *header,
        *rows,
        *bisect_lines,
    ]
    if failures:
        lines += ["", "Runs that did not finish cleanly:", *[f"- {f}" for f in failures]]
    # The repository's paths as the README shows them: relative to its root.
    text = ("\n".join(lines) + "\n").replace(f"{REPO}{os.sep}", "")
    print(text)
    if args.output is not None:
        write_atomically(args.output, text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
