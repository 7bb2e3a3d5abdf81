"""What ``fix --diff`` and ``--show-fixes`` print: the unified diff of each changed file
(a notebook's per cell) and the per-file count of fixes applied or available."""

from __future__ import annotations

import dataclasses
import sys
from collections import Counter
from pathlib import Path

from xlalint.engine import reporters
from xlalint.engine.escaping import diff_line, printable
from xlalint.engine.fix_guard import LineMap
from xlalint.engine.reporters import applicable
from xlalint.engine.runner import FileReport
from xlalint.model import Finding, Span, split_lines


def print_diffs(reports: list[FileReport], out, quiet: bool = False, unsafe: bool = True) -> None:
    import difflib

    from xlalint.engine.notebook import CellText, cell_diffs

    for r in reports:
        if not r.changed:
            continue
        assert r.source is not None and r.fixed_source is not None
        if isinstance(r.source, CellText) and isinstance(r.fixed_source, CellText):
            lines = cell_diffs(r.path, r.source, r.fixed_source)
        else:
            # Python's lines (not str.splitlines, which also breaks at a form feed): the diff applies.
            lines = difflib.unified_diff(
                split_lines(r.source, keepends=True), split_lines(r.fixed_source, keepends=True), *diff_names(r.path)
            )
        # Source can hold escape sequences (OSC 52 writes the clipboard): escaped as in every format.
        out.writelines(map(diff_line, lines))
    if quiet:  # as ruff's -q: the diff only
        return
    # The fixes withheld (they would make the file worse), as notes beside the diff,
    # located in the file as it is (the diff's old side), as their reasons are.
    for note in reporters.withheld_notes([_in_input(r, f) for r in reports for f in r.findings if f.fix_withheld]):
        print(note, file=sys.stderr)
    # The fix the port needs and the diff leaves out (an unsafe one, without --unsafe-fixes).
    for note in reporters.port_notes([f for r in reports for f in r.findings], unsafe):
        print(note, file=sys.stderr)
    changed = sum(1 for r in reports if r.changed)
    fixes = sum(len(r.fixed) for r in reports)
    after_port = sum(f.after_port for r in reports for f in r.fixed)
    print(
        f"\nWould fix {fixes} error{'s' if fixes != 1 else ''} in {changed} file{'s' if changed != 1 else ''}"
        f"{reporters.after_port_note(after_port)}.",
        file=sys.stderr,
    )


def _in_input(report: FileReport, finding: Finding) -> Finding:
    """A finding of the fixed text at its line in the input, where that line is unchanged."""
    if finding.cell is not None or not isinstance(report.source, str) or not report.changed:
        return finding
    line_map = LineMap(split_lines(report.source), split_lines(report.fixed_source or ""))
    line = line_map.old_line(finding.span.line)
    if line is None:
        return finding
    span = finding.span
    return dataclasses.replace(finding, span=Span(line, span.col, line + span.end_line - span.line, span.end_col))


def diff_names(path: str) -> tuple[str, str]:
    """``a/x.py``/``b/x.py`` as git shows a relative path; an absolute path as it is."""
    path = printable(path)
    return (path, path) if Path(path).is_absolute() else (f"a/{path}", f"b/{path}")


def print_fixes(reports: list[FileReport], *, fixed: bool, unsafe: bool, out) -> None:
    rows = [
        (
            r.path,
            Counter((f.code, f.name) for f in (r.fixed if fixed else [f for f in r.findings if applicable(f, unsafe)])),
        )
        for r in reports
    ]
    rows = [(path, counts) for path, counts in rows if counts]
    if not rows:
        return
    total = sum(sum(c.values()) for _, c in rows)
    print(f"\n{'Fixed' if fixed else 'Fixable'} {total} error{'s' if total != 1 else ''}:", file=out)
    for path, counts in rows:
        print(f"- {printable(path)}:", file=out)
        for (code, name), n in sorted(counts.items()):
            print(f"    {n} x {code} ({name})", file=out)
