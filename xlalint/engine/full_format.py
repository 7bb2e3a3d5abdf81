"""The ``full`` output format, the default of ``check`` on a terminal (as ruff's): each
finding with a code frame (the lines around it, a caret span under the reported
columns, ``help:`` with its fix's message) and, with ``--show-fixes``, a preview of the
fix as a diff. A notebook finding's frame shows the lines of its cell, numbered in it.

Written with ``rich`` (imported only here, so that the concise form stays as fast as it
was); colour on a terminal only, ``NO_COLOR`` turns it off, ``FORCE_COLOR`` on. What
comes from the file (names, source lines, messages quoting them) is escaped first and
handed to rich as plain text, never as markup.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import replace
from typing import TextIO

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from xlalint.engine.escaping import printable
from xlalint.engine.notebook import CellText, NotebookError, split_module
from xlalint.engine.reporters import FixEdits, Sources, applicable, location
from xlalint.engine.text_report import use_color  # noqa: F401  (its place before; the harness imports it here)
from xlalint.model import Finding, split_lines

CONTEXT_LINES = 2  # around the reported lines, as ruff shows (blank edge lines dropped)
PREVIEW_CONTEXT_LINES = 1
LONG_SPAN = 8  # a longer span shows its first and last lines only
SPAN_ENDS = 3
TAB_SIZE = 4

CODE = "bold red"
FIXABLE = "bold cyan"
GUTTER = "bold blue"
CARET = "bold red"
REMOVED = "red"
ADDED = "green"
HELP = "bold cyan"
NOTE = "bold"
UNSAFE_FIX_NOTE = "This is an unsafe fix and may change runtime behavior"  # ruff's words


def render_full(
    findings: Sequence[Finding],
    sources: Sources,
    *,
    unsafe: bool,
    show_fixes: bool,
    out: TextIO,
    color: bool,
) -> None:
    """Print each finding as a block, a blank line after each."""
    console = Console(
        file=out,
        force_terminal=color,
        color_system="standard" if color else None,
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=True,  # a code frame is never wrapped
        legacy_windows=False,
    )
    edits = FixEdits(findings, sources) if show_fixes else None
    # The lines of each file (and cell), split once: not once per finding of a large file.
    split: dict[tuple[str, int | None], list[str]] = {}
    for finding in findings:
        source = sources.get(finding.path)
        lines = None
        if source is not None:
            key = (finding.path, finding.cell)
            if key not in split:
                split[key] = split_lines(_frame_text(finding, source))
            lines = split[key]
        for line in finding_block(finding, source, unsafe=unsafe, edits=edits, lines=lines):
            console.print(line)
        console.print()


def finding_block(
    finding: Finding, source: str | None, *, unsafe: bool, edits: FixEdits | None, lines: list[str] | None = None
) -> list[Text]:
    """``lines``: the lines of ``source`` (of the finding's cell in a notebook), when the
    caller has them split."""
    if lines is None:
        lines = split_lines(_frame_text(finding, source)) if source is not None else []
    frame = _frame_rows(finding, lines) if lines else []
    preview = _preview_rows(finding, source, edits, lines) if edits is not None and source is not None else []
    width = max((len(str(number)) for number, *_ in frame + preview if number), default=1)
    pad = " " * width

    header = Text().append(finding.code, style=CODE)
    if applicable(finding, unsafe):
        header.append(" [*]", style=FIXABLE)
    header.append(" ").append(printable(finding.message), style="bold")
    block = [header, Text(pad).append("--> ", style=GUTTER).append(location(finding))]
    if frame:
        block.append(_gutter(pad))
        for number, marker, text, caret in frame:
            gutter = f"{number:>{width}} |" if number else f"{pad} |"
            row = Text().append(gutter, style=GUTTER)
            if marker:
                row.append(" " + marker, style=CARET)
            if text:
                row.append(" " + text, style=CARET if caret else "")
            row.rstrip()  # a blank line's row ends at its gutter
            block.append(row)
        block.append(_gutter(pad))
    if finding.fix is not None:
        block.append(Text().append("help", style=HELP).append(": " + printable(finding.fix.message)))
    if preview:
        block.append(_gutter(pad))
        for number, sign, text in preview:
            style = REMOVED if sign == "-" else ADDED if sign == "+" else ""
            row = Text().append(f"{number or '':>{width}} ", style=GUTTER).append(sign, style=style or GUTTER)
            row.append(" " + text if text else "", style=style)
            row.rstrip()
            block.append(row)
        block.append(_gutter(pad))
    if finding.fix is not None and finding.fix.applicability == "unsafe":
        # As ruff: an unsafe fix says so, whether or not its diff is shown.
        block.append(Text().append("note", style=NOTE).append(": " + UNSAFE_FIX_NOTE))
    if getattr(finding, "after_port", False):
        block.append(
            Text()
            .append("note", style=NOTE)
            .append(": reported for the code as it will be once the port makes it an XLA script")
        )
    if getattr(finding, "fix_withheld", None):
        block.append(Text().append("note", style=NOTE).append(": fix " + printable(finding.fix_withheld)))
    return block


def _gutter(pad: str) -> Text:
    return Text().append(f"{pad} |", style=GUTTER)


def _frame_text(finding: Finding, source: str) -> str:
    """The text the finding's lines count in: its cell's in a notebook."""
    cell_texts = getattr(source, "cell_texts", None)  # a notebook's CellText
    if finding.cell is not None and cell_texts is not None:
        return cell_texts().get(finding.cell, "")
    return source


def _display(text: str) -> str:
    return printable(text, keep_tabs=True).expandtabs(TAB_SIZE)


def _frame_rows(finding: Finding, lines: list[str]) -> list[tuple[int | None, str, str, bool]]:
    """(line number or None, span marker, text, is-a-caret-row) rows of the frame."""
    s = finding.span
    first, last = max(1, min(s.line, len(lines))), max(1, min(s.end_line, len(lines)))
    if first == last:
        line = lines[first - 1]
        start = cell_len(_display(line[: s.col]))
        end = cell_len(_display(line[: s.end_col])) if s.end_line == s.line else cell_len(_display(line.rstrip()))
        caret = " " * start + "^" * max(1, end - start)
        rows = [(first, "", _display(line), False), (None, "", caret, True)]
        return _with_context(rows, lines, first, last)
    numbers = list(range(first, last + 1))
    if len(numbers) > LONG_SPAN:
        numbers = [*numbers[:SPAN_ENDS], 0, *numbers[-SPAN_ENDS:]]
    rows = []
    for number in numbers:
        if number == 0:
            rows.append((None, "|", "...", False))
            continue
        rows.append((number, "/" if number == first else "|", _display(lines[number - 1]), False))
    end = max(1, cell_len(_display(lines[last - 1][: s.end_col])))
    rows.append((None, "|" + "_" * end + "^", "", True))
    return _with_context(rows, lines, first, last, indent=True)


def _with_context(rows: list, lines: list[str], first: int, last: int, indent: bool = False) -> list:
    """``rows`` with up to CONTEXT_LINES lines before and after, blank edge lines dropped;
    with ``indent``, context lines leave room for the span marker column."""

    def row(number: int) -> tuple[int, str, str, bool]:
        return (number, " " if indent else "", _display(lines[number - 1]), False)

    before = list(range(max(1, first - CONTEXT_LINES), first))
    after = list(range(last + 1, min(len(lines), last + CONTEXT_LINES) + 1))
    while before and not lines[before[0] - 1].strip():
        before.pop(0)
    while after and not lines[after[-1] - 1].strip():
        after.pop()
    return [row(n) for n in before] + rows + [row(n) for n in after]


def _preview_rows(
    finding: Finding, source: str, edits: FixEdits, lines: list[str]
) -> list[tuple[int | None, str, str]]:
    """The fix as a diff: (line number before the fix or None, ``|``/``-``/``+``, text).
    In a notebook, the diff of each cell the fix changes, numbered in the cell."""
    text_edits = edits.text_edits(finding)
    if not text_edits:
        return []
    if not isinstance(source, CellText):
        return _window_diff_rows(lines, text_edits)
    fixed = _applied(source, text_edits)
    try:
        after = {cell.number: cell.text for cell in split_module(fixed, source.cells)}
    except NotebookError:
        return []
    rows: list[tuple[int | None, str, str]] = []
    for number, text in source.cell_texts().items():
        if after.get(number, text) != text:
            rows.append((None, "|", f"cell {number}"))
            rows += _diff_rows(split_lines(text), split_lines(after[number]))
    return rows


def _window_diff_rows(lines: list[str], text_edits: list) -> list[tuple[int | None, str, str]]:
    """The diff of the lines the edits change, and of unchanged lines around them, each
    group of nearby edits on its own (a fix's import at the top, its change below): a
    diff of the whole file for each finding made the preview of a large file quadratic."""
    edits = sorted(text_edits, key=lambda e: (e.start, e.end))
    groups = [[edit] for edit in edits]
    while True:  # join the groups whose windows meet
        windows = [_window(lines, group, groups, position) for position, group in enumerate(groups)]
        joined = next((i for i in range(1, len(groups)) if windows[i][0] <= windows[i - 1][1] + 1), None)
        if joined is None:
            break
        groups[joined - 1 : joined + 1] = [groups[joined - 1] + groups[joined]]
    rows: list[tuple[int | None, str, str]] = []
    for group, (first, last) in zip(groups, windows):
        # The window keeps its line ends: an edit may join or split lines.
        window = "".join(line + "\n" for line in lines[first - 1 : last])
        shifted = [
            replace(edit, start=(edit.start[0] - first + 1, edit.start[1]), end=(edit.end[0] - first + 1, edit.end[1]))
            for edit in group
        ]
        found = _diff_rows(split_lines(window), split_lines(_applied(window, shifted)), first - 1)
        if rows and found:
            rows.append((None, "|", "..."))
        rows += found
    return rows


def _window(lines: list[str], group: list, groups: list[list], position: int) -> tuple[int, int]:
    """The first and last line of the window of a group of edits. A diff aligns an
    ambiguous change (a blank line added next to a blank line) by the longest run of
    unchanged lines, the one above the change or the one below it: the window keeps
    enough of each, and their difference, for the same choice."""
    first_row = min(edit.start[0] for edit in group)
    last_row = min(len(lines), max(edit.end[0] for edit in group))
    size = max(0, last_row - first_row + 1) + sum(edit.content.count("\n") + 1 for edit in group)
    base = max(PREVIEW_CONTEXT_LINES + 2, size + 1)
    top = max((edit.end[0] for edit in groups[position - 1]), default=0) if position else 0
    bottom = min(edit.start[0] for edit in groups[position + 1]) if position + 1 < len(groups) else len(lines) + 1
    above, below = max(0, first_row - 1 - top), max(0, bottom - 1 - last_row)
    lead = max(-(size + 1), min(size + 1, above - below))
    return first_row - min(first_row - 1, base + max(lead, 0)), last_row + min(
        len(lines) - last_row, base + max(-lead, 0)
    )


def _diff_rows(before: list[str], after: list[str], offset: int = 0) -> list[tuple[int | None, str, str]]:
    """``offset``: how many lines of the file lie above ``before``."""
    rows: list[tuple[int | None, str, str]] = []
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for group in matcher.get_grouped_opcodes(PREVIEW_CONTEXT_LINES):
        if rows:
            rows.append((None, "|", "..."))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [(offset + i + 1, "|", _display(before[i])) for i in range(i1, i2)]
                continue
            rows += [(offset + i + 1, "-", _display(before[i])) for i in range(i1, i2)]
            rows += [(None, "+", _display(after[j])) for j in range(j1, j2)]
    return rows


def _applied(source: str, text_edits: list) -> str:
    """``source`` with the edits (1-based rows and columns, not overlapping) made."""
    starts = [0]
    for line in split_lines(source, keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(position: tuple[int, int]) -> int:
        row, column = position
        return starts[min(row, len(starts)) - 1] + column - 1

    for edit in sorted(text_edits, key=lambda e: (e.start, e.end), reverse=True):
        source = source[: offset(edit.start)] + edit.content + source[offset(edit.end) :]
    return source
