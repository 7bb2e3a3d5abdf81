"""``xlalint fix --verify SCRIPT [-- ARGS]``: fix, prove the fix on the script, write
only the fixes that ran.

The script runs as ``xlalint run --bisect`` runs it (the CPU reference, the port, the
fixed copy, each bounded by ``--steps``). When the fixed copy crashed or its loss left
the reference's where the port ran well, bisect names the fixes to blame; those are
withdrawn and the others written to the user's files (atomically; a file changed during
the runs is not written). The withdrawn fixes are listed as the fix loop's withheld ones
are (``note: ... fix the fixed script crashed: ...``; ``fix_withheld`` in JSON). When
the fixed copy failed and no fix could be blamed, nothing is written.

One round: the fixes left are not run again (a second crash hidden behind the first
shows at the next ``--verify``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from xlalint.harness import prepare, report, session
from xlalint.harness.blame import Blame
from xlalint.harness.environment import HarnessEnvironmentError
from xlalint.help_format import error_line

EXIT_OK, EXIT_FAILED, EXIT_ERROR = 0, 1, 2


@dataclass
class VerifyOptions:
    script: Path
    script_args: list[str] = field(default_factory=list)
    unsafe_fixes: bool = False
    steps: int | None = None  # None: --compare's default
    timeout_s: float | None = session.DEFAULT_TIMEOUT_S
    json_output: bool = False


def withheld_reason(blame: Blame) -> str:
    what = "crashed" if blame.crash else "diverged from the CPU loss"
    trials = f"{blame.trials} trial{'' if blame.trials == 1 else 's'}"
    return f"the fixed script {what}: {blame.error} (found by bisect: {trials}, {blame.seconds:.1f} s)"


def verify(options: VerifyOptions, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Everything ``fix --verify`` does; returns its exit status."""
    from xlalint.engine import source as engine_source

    stdout, stderr = stdout or sys.stdout, stderr or sys.stderr
    run_options = session.RunOptions(
        script=options.script,
        unsafe_fixes=options.unsafe_fixes,
        bisect=True,
        steps=options.steps,
        timeout_s=options.timeout_s,
        script_args=list(options.script_args),
    )
    try:
        script_file = prepare.read_user_file(options.script, str(options.script), Path(options.script.name))
        modules = prepare.read_local_modules(options.script, str(options.script))
        # Read now: a file the user changes while the script runs is not overwritten.
        originals = {file.path: engine_source.read(file.path) for file in [script_file, *modules]}
        harness_report = session.run_harness(run_options, stderr)
    except HarnessEnvironmentError as error:
        stderr.write(error_line(str(error)) + "\n")
        return EXIT_ERROR
    except (OSError, engine_source.SourceError, SyntaxError, UnicodeDecodeError) as error:
        stderr.write(error_line(f"{options.script}: cannot read: {error}") + "\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        stderr.write("xlalint fix --verify: interrupted; nothing was written\n")
        return session.EXIT_INTERRUPTED
    stderr.write(report.format_text(harness_report))
    fixed = harness_report.runs.get("fixed")
    blame = harness_report.blame
    withdrawn = frozenset(blame.fixes) if blame else frozenset()
    if fixed is not None and not fixed.ok and not withdrawn:
        stderr.write(
            error_line(f"the fixed script failed ({fixed.error or fixed.status_line()}) and no fix could be blamed")
            + "; nothing was written\n"
        )
        return EXIT_FAILED
    reason = withheld_reason(blame) if withdrawn else None
    written, notes, remaining = [], [], []
    for user_file in [script_file, *modules]:
        outcome = fix_without(user_file, withdrawn, options.unsafe_fixes, reason)
        remaining.extend(outcome.findings)
        notes.extend(outcome.notes)
        if outcome.text is None:
            continue
        try:
            engine_source.write_atomic(user_file.path, originals[user_file.path], outcome.text)
        except engine_source.SourceError as error:
            stderr.write(error_line(f"{user_file.display_path}: not written: {error}") + "\n")
            return EXIT_ERROR
        written.append((user_file.display_path, outcome.applied))
    if options.json_output:
        from xlalint.engine.reporters import finding_to_json

        stdout.write(json.dumps([finding_to_json(finding) for finding in remaining], indent=2) + "\n")
    else:
        for path, count in written:
            stdout.write(f"{path}: {count} fix{'' if count == 1 else 'es'} written (they ran)\n")
        if not written:
            stdout.write("no fix written\n")
        for note in notes:
            stdout.write(note + "\n")
    return EXIT_OK


@dataclass
class FixedFile:
    """A user's file fixed without the withdrawn fixes."""

    text: str | None  # None: nothing to write
    applied: int
    findings: list  # what is left, the withdrawn fixes' findings marked
    notes: list[str]


def fix_without(user_file: prepare.UserFile, withdrawn: frozenset, unsafe: bool, reason: str | None) -> FixedFile:
    from xlalint.engine.api import fix_source

    held_back: set[int] = set()  # ids of the findings whose fix was withdrawn, in the last pass

    def keep(finding, line: int | None) -> bool:
        if prepare.AppliedFix(user_file.display_path, finding.code, line) in withdrawn:
            held_back.add(id(finding))
            return False
        return True

    result = fix_source(user_file.source, user_file.display_path, unsafe=unsafe, keep=keep if withdrawn else None)
    if result.error:
        return FixedFile(None, 0, list(result.remaining), [f"note: {user_file.display_path}: {result.error}"])
    findings, notes = [], []
    for finding in result.remaining:
        if reason and id(finding) in held_back:
            finding = dataclasses.replace(finding, fix=None, fix_withheld=reason)
            notes.append(
                f"note: {user_file.display_path}:{finding.span.line}:{finding.span.col + 1}: {finding.code} fix {reason}"
            )
        findings.append(finding)
    text = result.source if result.source != user_file.source else None
    return FixedFile(text, len(result.applied), findings, notes)


def command(paths: list[str] | None, *, unsafe: bool, steps: int | None, json_output: bool) -> int:
    """``fix --verify [SCRIPT] [-- ARGS]`` from the command line's words: the script, then
    its arguments."""
    paths = list(paths or [])
    if not paths:
        sys.stderr.write(error_line("--verify runs a script: give it (xlalint fix --verify train.py -- ARGS)") + "\n")
        return EXIT_ERROR
    script = Path(paths[0])
    if not script.is_file():
        sys.stderr.write(error_line(f"{script}: no such file (--verify runs one script)") + "\n")
        return EXIT_ERROR
    if steps is not None and steps < 0:
        sys.stderr.write(error_line("--steps must be 0 (no limit) or a number of optimizer steps") + "\n")
        return EXIT_ERROR
    return verify(VerifyOptions(script, paths[1:], unsafe_fixes=unsafe, steps=steps, json_output=json_output))
