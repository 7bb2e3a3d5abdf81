"""One fix's edits from the statements it touches, not from the whole file.

``apply.file_edits`` parses the whole file with libcst: over a second for 5,000 lines,
however small the fix. The language server's quick fix at the cursor needs one fix's
edits, at once: here they come from a libcst parse of only the module's top-level
statements that the fix rewrites (whole lines, so columns stay as they are) and, for
the imports it adds, of the module's head (the statements ``imports.add_imports``
reads: the first, the imports and the setup code that installs them, what follows). Each part is a module of its
own; its edits are moved back to the file's lines. The result is ``file_edits``' for
the fix; where that cannot be promised (the fix removes imports, which asks about the
whole file; a span outside every statement), the answer is None and the caller asks
``file_edits``.
"""

from __future__ import annotations

import ast
import dataclasses
from bisect import bisect_right

import libcst as cst

from xlalint.fixers.apply import TextEdit, file_edits, text_edits
from xlalint.fixers.comment_edits import is_comment_fix
from xlalint.fixers.imports import add_imports
from xlalint.model import AddParameter, Fix, RemoveKeyword, ReplaceExpr, SetKeyword, Span, split_lines

# Operations that rewrite code within a statement: its neighbours have no say.
_IN_A_STATEMENT = (ReplaceExpr, SetKeyword, RemoveKeyword, AddParameter)


def local_fix_edits(source: str, tree: ast.Module, fix: Fix) -> list[TextEdit] | None:
    """The edits ``fix`` makes to ``source`` (whose ``ast`` tree is ``tree``), as
    ``apply.fix_edits(source, fix)`` gives them; ``[]`` when it cannot be carried out;
    None when they cannot be found from the statements it touches."""
    if is_comment_fix(fix):
        return file_edits(source, [fix])[fix]  # no parse: comment fixes are text edits
    if fix.unused_imports or not fix.operations or not tree.body:
        return None
    lines = split_lines(source, keepends=True)
    ranges = _line_ranges(tree.body)
    spans = [span for op in fix.operations for span in _spans(op)]
    low, high = min(s.line for s in spans), max(s.end_line for s in spans)
    first, last = _covering(ranges, low, high)
    if low < first or high > last:
        return None  # a span on no statement's lines
    # A fix that adds, removes or moves statements sets the blank lines and comments
    # around them from its neighbours: the statements on each side come too, untouched.
    fence: tuple[int, int] | None = None
    if not all(isinstance(op, _IN_A_STATEMENT) for op in fix.operations):
        fence = (first, last)
        first, last = _covering(ranges, max(first - 1, 1), min(last + 1, ranges[-1][1]))
    edits: list[TextEdit] = []
    if fix.imports:
        head_last = _covering(ranges, 1, ranges[_head_length(tree.body) - 1][1])[1]
        if first <= head_last + 1:  # the fix is in the head, or next to it: one region
            first, last = 1, max(last, head_last)
        else:
            head = "".join(lines[:head_last])
            try:
                new = add_imports(cst.parse_module(head), set(fix.imports), set())
            except (cst.ParserSyntaxError, RecursionError):
                return None
            edits = text_edits(head, new.code)
            fix = dataclasses.replace(fix, imports=())
    region = "".join(lines[first - 1 : last])
    moved = _shifted(fix, 1 - first)
    local = file_edits(region, [moved])[moved]
    if not local:
        return [] if _region_parses(region) else None
    edits += [
        TextEdit(e.content, (e.start[0] + first - 1, e.start[1]), (e.end[0] + first - 1, e.end[1])) for e in local
    ]
    if fence is not None and any(_touches_neighbours(e, fence, ranges) for e in edits[-len(local) :]):
        return None
    return sorted(edits, key=lambda e: (e.start, e.end))


def _touches_neighbours(edit: TextEdit, fence: tuple[int, int], ranges: list[tuple[int, int]]) -> bool:
    """The edit reaches into a statement outside ``fence`` (the lines the fix touches):
    the region was not wide enough to say what the whole file's edit is."""
    start = edit.start[0]
    end = edit.end[0] - (1 if edit.end[1] == 1 else 0)  # up to a line's start: not into that line
    return any(s <= end and start <= e and (e < fence[0] or s > fence[1]) for s, e in ranges)


def _line_ranges(body: list[ast.stmt]) -> list[tuple[int, int]]:
    """Each top-level statement's first and last line (decorators included)."""
    ranges = []
    for statement in body:
        decorators = getattr(statement, "decorator_list", ())
        first = min([statement.lineno, *(d.lineno for d in decorators)])
        ranges.append((first, statement.end_lineno or statement.lineno))
    return ranges


def _covering(ranges: list[tuple[int, int]], low: int, high: int) -> tuple[int, int]:
    """The lines of the statements that hold lines ``low`` to ``high``, with every
    statement that shares a line with them (``a = 1; b = 2``)."""
    starts = [start for start, _ in ranges]
    lo = max(bisect_right(starts, low) - 1, 0)
    hi = max(bisect_right(starts, high) - 1, lo)
    first, last = ranges[lo][0], max(end for _, end in ranges[lo : hi + 1])
    while lo > 0 and ranges[lo - 1][1] >= first:
        lo -= 1
        first = min(first, ranges[lo][0])
    while hi + 1 < len(ranges) and ranges[hi + 1][0] <= last:
        hi += 1
        last = max(last, ranges[hi][1])
    return first, last


# Statements with a body: the setup code before a notebook's imports ends at one.
_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While)
_COMPOUND += (ast.With, ast.AsyncWith, ast.Try, getattr(ast, "TryStar", ast.Try), ast.Match)


def _head_length(body: list[ast.stmt]) -> int:
    """The statements ``add_imports`` may read, or more: the first, the run of simple
    statements after it (the imports, and the setup code of an exported notebook that
    installs what they import, with the imports after it), and the two statements after
    them (the one after the imports may get a blank line above)."""
    end = 1
    while end < len(body) and not isinstance(body[end], _COMPOUND):
        end += 1
    return min(end + 2, len(body))


def _spans(value: object) -> list[Span]:
    """Every span an operation names (its target, its parts, a move's anchor)."""
    if isinstance(value, Span):
        return [value]
    if isinstance(value, tuple):
        return [span for item in value for span in _spans(item)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [span for f in dataclasses.fields(value) for span in _spans(getattr(value, f.name))]
    return []


def _shifted(fix: Fix, lines: int) -> Fix:
    """``fix`` with every span moved by ``lines``."""
    return dataclasses.replace(fix, operations=tuple(_shift(op, lines) for op in fix.operations))


def _shift(value, lines: int):
    if isinstance(value, Span):
        return dataclasses.replace(value, line=value.line + lines, end_line=value.end_line + lines)
    if isinstance(value, tuple):
        return tuple(_shift(item, lines) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _shift(getattr(value, f.name), lines) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    return value


def _region_parses(region: str) -> bool:
    try:
        cst.parse_module(region)
    except (cst.ParserSyntaxError, RecursionError):
        return False
    return True
