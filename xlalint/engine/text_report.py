"""The line formats people read: ``concise`` (one line a finding), ``grouped`` (the
findings under their file's name) and ``pylint`` (``path:line: [CODE] message``), with
ruff's colours when colour is on (:func:`use_color`: a terminal, or
``FORCE_COLOR``): the path bold (underlined when it heads a group), the separators
cyan, the code bold red, the ``*`` of ``[*]`` cyan. The other formats are
:mod:`xlalint.engine.reporters`'.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import TextIO

from xlalint.engine.escaping import printable
from xlalint.engine.reporters import AFTER_PORT, applicable
from xlalint.model import Finding

#: The formats rendered here; ``text`` is concise's old name.
LINE_FORMATS = ("concise", "text", "grouped", "pylint")

_BOLD, _UNDERLINE, _RED, _CYAN, _RESET = "\x1b[1m", "\x1b[4m", "\x1b[31m", "\x1b[36m", "\x1b[0m"


def use_color(stream: TextIO) -> bool:
    """Colour on a terminal; ``NO_COLOR`` (non-empty) turns it off, ``FORCE_COLOR``
    (non-empty) on, NO_COLOR winning as https://no-color.org asks."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


class _Paint:
    def __init__(self, color: bool):
        self.color = color

    def __call__(self, text: str, *styles: str) -> str:
        return "".join(styles) + text + _RESET if self.color and text else text

    def sep(self) -> str:
        return self(":", _CYAN)

    def marker(self, finding: Finding, unsafe: bool) -> str:
        return f" [{self('*', _CYAN)}]" if applicable(finding, unsafe) else ""

    def code(self, finding: Finding) -> str:
        return self(finding.code, _BOLD, _RED)


def _message(finding: Finding) -> str:
    return printable(finding.message) + (AFTER_PORT if finding.after_port else "")


def _position(finding: Finding, paint: _Paint) -> tuple[str, str]:
    """The row (``cell N:LINE`` in a notebook) and the column, as printed."""
    cell = f"cell {finding.cell}{paint.sep()}" if finding.cell is not None else ""
    return f"{cell}{finding.span.line}", str(finding.span.col + 1)


def concise(findings: Sequence[Finding], unsafe: bool, color: bool = False) -> str:
    paint = _Paint(color)
    lines = []
    for f in findings:
        row, col = _position(f, paint)
        lines.append(
            f"{paint(printable(f.path), _BOLD)}{paint.sep()}{row}{paint.sep()}{col}{paint.sep()} "
            f"{paint.code(f)}{paint.marker(f, unsafe)} {_message(f)}"
        )
    return "\n".join(lines)


def grouped(findings: Sequence[Finding], unsafe: bool, color: bool = False) -> str:
    """As ruff's: ``path:`` then ``  ROW:COL CODE [*] message`` per finding (rows right-
    aligned, columns left-aligned, per file), a blank line after each file."""
    paint = _Paint(color)
    by_file: dict[str, list[Finding]] = {}
    for f in findings:
        by_file.setdefault(f.path, []).append(f)
    blocks = []
    for path, items in by_file.items():
        plain = [_position(f, _Paint(False)) for f in items]
        row_width = max(len(row) for row, _ in plain)
        col_width = max(len(col) for _, col in plain)
        lines = [f"{paint(printable(path), _UNDERLINE)}:"]
        for f, (row, col) in zip(items, plain, strict=True):
            painted_row, _ = _position(f, paint)
            pad_row, pad_col = " " * (row_width - len(row)), " " * (col_width - len(col))
            lines.append(
                f"  {pad_row}{painted_row}{paint.sep()}{col}{pad_col} {paint.code(f)}{paint.marker(f, unsafe)} "
                f"{_message(f)}"
            )
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def pylint(findings: Sequence[Finding]) -> str:
    """As ruff's (and pylint's parseable format): ``path:LINE: [CODE] message``; a
    notebook's line is its line within the cell, named as ``path:cell N:LINE``."""
    return "\n".join(
        f"{printable(f.path)}:{f'cell {f.cell}:' if f.cell is not None else ''}{f.span.line}: [{f.code}] {_message(f)}"
        for f in findings
    )


def render(fmt: str, findings: Sequence[Finding], unsafe: bool, color: bool = False) -> str:
    if fmt == "grouped":
        return grouped(findings, unsafe, color)
    if fmt == "pylint":
        return pylint(findings)
    return concise(findings, unsafe, color)


def paint_summary(summary: str, color: bool) -> str:
    """The ``[*]`` that starts ruff's "fixable" line, its ``*`` cyan when colour is on."""
    return re.sub(r"(?m)^\[\*\]", f"[{_CYAN}*{_RESET}]", summary) if color else summary
