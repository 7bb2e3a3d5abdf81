"""The plain data that flows between rules, fixers, the fix loop and the reporters.

Everything here is plain data free of libcst, so findings can cross process
boundaries, be cached (as JSON: ``xlalint.engine.findings_json``), and be produced
on the check path without importing libcst.
A fix is a list of *operations* (``ReplaceExpr``, ``SetKeyword``, ...): rules
describe what to change by source positions; ``xlalint.fixers.apply`` carries the
operations out on a libcst tree when, and only when, a file is being fixed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Literal

Applicability = Literal["safe", "unsafe"]


@dataclass(frozen=True, order=True)
class Span:
    """A source range: 1-based lines, 0-based *character* columns, end exclusive.

    Columns count characters (as libcst and editors do), not the UTF-8 bytes that
    ``ast`` reports; ``Span.of`` converts.
    """

    line: int
    col: int
    end_line: int
    end_col: int

    @classmethod
    def of(cls, node: ast.AST, lines: list[str]) -> Span:
        line, end_line = node.lineno, node.end_lineno or node.lineno
        return cls(
            line,
            _char_col(lines, line, node.col_offset),
            end_line,
            _char_col(lines, end_line, node.end_col_offset or 0),
        )

    def contains(self, other: Span) -> bool:
        return (self.line, self.col) <= (other.line, other.col) and (
            other.end_line,
            other.end_col,
        ) <= (self.end_line, self.end_col)

    def overlaps(self, other: Span) -> bool:
        return (self.line, self.col) < (other.end_line, other.end_col) and (
            other.line,
            other.col,
        ) < (self.end_line, self.end_col)


_NEWLINE = re.compile(r"\r\n|\r|\n")


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """Python's physical lines: split at ``\n``, ``\r\n`` and ``\r`` only (unlike
    ``str.splitlines``, which also splits at form feeds, ``\x1c``, ``\u2028``...)."""
    if "\r" not in text:  # the common case, done by str.split (ten times faster)
        lines = text.split("\n")
        last = lines.pop()
        if keepends:
            lines = [line + "\n" for line in lines]
        if last:
            lines.append(last)
        return lines
    lines = []
    start = 0
    for match in _NEWLINE.finditer(text):
        lines.append(text[start : match.end() if keepends else match.start()])
        start = match.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


def line_count(text: str) -> int:
    """``len(split_lines(text))``, without making the lines."""
    if "\r" not in text:
        return text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return len(split_lines(text))


def _char_col(lines: list[str], line: int, byte_col: int) -> int:
    if line - 1 >= len(lines):
        return byte_col
    text = lines[line - 1]
    if text.isascii():
        return byte_col
    return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))


# --- fix operations -----------------------------------------------------------------
# Each operation names its target by a Span taken from the `ast` node; the applier
# finds the libcst node at that span. Code templates are Python source in which
# `{name}` is replaced by the exact source text (comments and all) of the node at
# `parts[name]`; write `{{`/`}}` for literal braces.


@dataclass(frozen=True)
class ReplaceExpr:
    """Replace the expression at ``span`` with ``template``."""

    span: Span
    template: str
    parts: tuple[tuple[str, Span], ...] = ()


@dataclass(frozen=True)
class SetKeyword:
    """Give the call at ``span`` the keyword ``name=value`` (replacing one that is
    there, unless ``only_if_missing``). A new one goes before ``**kwargs``, else last,
    on a line of its own when the arguments are one a line."""

    span: Span
    name: str
    value: str
    only_if_missing: bool = False


@dataclass(frozen=True)
class RemoveKeyword:
    """Drop the keyword argument ``name`` from the call at ``span``."""

    span: Span
    name: str


@dataclass(frozen=True)
class InsertStatement:
    """Insert ``code`` (one or more statements) before or after the statement that
    contains ``span``, at its indentation."""

    span: Span
    code: str
    where: Literal["before", "after"] = "before"
    parts: tuple[tuple[str, Span], ...] = ()


@dataclass(frozen=True)
class RemoveStatement:
    """Remove the statement that contains ``span``, with the comment lines above it.

    A block left empty gets ``pass``; but an ``if`` left with nothing to do (an empty
    body, no ``else``, a test that only reads names, attributes, subscripts and
    constants) is removed too, its block then judged the same way, and an ``else``
    left empty is dropped. The comment lines above a removed ``if`` stay where it was."""

    span: Span


@dataclass(frozen=True)
class MoveStatement:
    """Move the statement that contains ``span``, with the comments above it, before
    or after the statement that contains ``anchor`` (in the same block or another)."""

    span: Span
    anchor: Span
    where: Literal["before", "after"] = "before"


@dataclass(frozen=True)
class AppendToBody:
    """Append ``code`` as the last statement of the body of the compound statement
    (loop, function, ...) that starts at ``span``."""

    span: Span
    code: str


@dataclass(frozen=True)
class AddParameter:
    """Add a positional parameter ``name`` first in the ``def`` at ``span``."""

    span: Span
    name: str


@dataclass(frozen=True)
class UnwrapWith:
    """Take the item whose context expression is at ``span`` out of its ``with``
    statement. A ``with`` left with no item is replaced by its body, dedented; the
    comments of its header and its own leading lines go above the body's first
    statement, the comments that close the body follow its last."""

    span: Span


@dataclass(frozen=True)
class ReplaceComment:
    """Replace the text at ``span``, within one line, with ``text``: a comment (and the
    blanks before it, when it goes). Carried out on the text, not on libcst's tree: it
    changes nothing but the end of the line, where no other operation's span reaches."""

    span: Span
    text: str


Operation = (
    ReplaceExpr
    | SetKeyword
    | RemoveKeyword
    | InsertStatement
    | RemoveStatement
    | MoveStatement
    | AppendToBody
    | AddParameter
    | UnwrapWith
    | ReplaceComment
)


@dataclass(frozen=True, order=True)
class Import:
    """An import a fix needs: ``import module [as asname]`` or
    ``from module import name [as asname]``."""

    module: str
    name: str | None = None
    asname: str | None = None


#: The title of a fix without which a port runs on the CPU: XLA104's fix of the
#: ``is_available()`` test that is the only path to the accelerator. Not applied, the
#: summary of ``check``/``fix`` names it (``reporters.port_notes``).
PORT_NEEDS_FIX = "Treat the XLA device as available (the port needs it)"


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
    message: str
    operations: tuple[Operation, ...]
    #: Imports the fixed code needs (added unless already there).
    imports: tuple[Import, ...] = ()
    #: Imports the fix may leave unused (removed only if nothing uses them any more).
    unused_imports: tuple[Import, ...] = ()


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    message: str
    path: str
    span: Span
    fix: Fix | None = None
    noqa_row: int | None = None
    # The 1-based line numbers on which a suppression comment may hide this finding.
    noqa_lines: tuple[int, ...] = field(default=(), compare=False)
    # In a notebook: the 1-based cell (counting every cell); ``span`` is then within it.
    cell: int | None = None
    # Follows from the port: an XLA-script rule's finding in a file that becomes an XLA
    # script only when its fixes (XLA104's) import torch_xla.
    after_port: bool = False
    # Set by the fix loop: why this finding's fix was not applied (it would have made
    # the file worse), or by a rule that withholds its usual fix and says why (XLA101 on
    # labels copied from padded input_ids); the finding then has no fix.
    fix_withheld: str | None = None

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.span.line, self.span.col, self.code)


#: The code and name of a file that cannot be checked (read, decoded, parsed): not a rule.
SYNTAX_ERROR = ("XLA000", "syntax-error")


def error_finding(path: str, message: str, line: int = 1, col: int = 0) -> Finding:
    """The finding of a file that cannot be checked, and why (``SYNTAX_ERROR``)."""
    code, name = SYNTAX_ERROR
    span = Span(line, col, line, col)
    return Finding(code=code, name=name, message=message, path=path, span=span, noqa_row=line)
