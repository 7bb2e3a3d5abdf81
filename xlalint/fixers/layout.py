"""Fixed lines at the file's line length, laid out as the user's formatter would.

A fix that adds an argument (``drop_last=True``, a ``sampler=DistributedSampler(...)``)
can push a call past the line length the project formats to. Every line a pass of
fixes made longer than that length, where the code it replaced fitted, has its call
split as black and ``ruff format`` split one: one argument a line, a trailing comma,
``)`` back at the call's indentation. The same for any operation: this runs on the
fixed module, not in each rewrite, over the code the rewrite says the fixes wrote
(``Written``): never a diff of the whole file.

The length is ruff's ``line-length`` (``ruff.toml``, ``.ruff.toml`` or ``[tool.ruff]``),
else black's (``[tool.black]``), from the nearest folder that has one, else 88 (both
tools' default). The files are read as data (``tomllib``), never run.
"""

from __future__ import annotations

import functools
import itertools
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
import tomllib
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from xlalint.model import split_lines

DEFAULT_LINE_LENGTH = 88
# ruff accepts 1..320.
_MAX_LINE_LENGTH = 320
# A split argument may still be too long: it is split in turn, this many times at most.
_ROUNDS = 3


def line_length_for(path: str) -> int:
    """The line length the project of ``path`` formats to."""
    folder = Path(path).resolve().parent if path not in ("-", "<stdin>") else Path.cwd()
    return _line_length_in(folder)


@functools.lru_cache(maxsize=256)
def _line_length_in(folder: Path) -> int:
    for directory in (folder, *folder.parents):
        for name in (".ruff.toml", "ruff.toml", "pyproject.toml"):
            found = _configured_length(directory / name)
            if found is not None:
                return found
    return DEFAULT_LINE_LENGTH


def _configured_length(path: Path) -> int | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    if path.name == "pyproject.toml":
        tool = data.get("tool")
        tool = tool if isinstance(tool, dict) else {}
        candidates = [tool.get("ruff"), tool.get("black")]
    else:
        candidates = [data]
    for table in candidates:
        if isinstance(table, dict):
            value = table.get("line-length")
            if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= _MAX_LINE_LENGTH:
                return value
    return None


@dataclass
class Written:
    """Code a fix wrote: the ``nodes`` of the fixed module that stand in the place of
    the source lines ``replaced`` (1-based, first and last; None where it is inserted)."""

    nodes: list[cst.CSTNode]
    replaced: tuple[int, int] | None


def wrap_long_lines(before: str, module: cst.Module, written: Sequence[Written], line_length: int) -> cst.Module:
    """``module`` (``before`` once fixed) with the calls on the lines the fixes pushed past
    ``line_length`` split one argument a line. Only the ``written`` code is looked at:
    the cost follows the fixes, not the file (a whole-file diff of a file of repeated
    lines is quadratic)."""
    old_lines = split_lines(before)
    regions = [(region.nodes, _source_lines(old_lines, region.replaced)) for region in written]
    for round_ in range(_ROUNDS):
        if not regions:
            return module
        text_lines = split_lines(module.code)
        if all(len(line) <= line_length for line in text_lines):
            return module
        positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        long_lines = _lines_made_too_long(regions, positions, text_lines, line_length, judge_replaced=round_ == 0)
        if not long_lines:
            return module
        calls = _calls_to_split(positions, text_lines, long_lines)
        if not calls:
            return module
        splitter = _Splitter(calls, module.default_indent, positions)
        module = module.visit(splitter)
        # What a split leaves too long lies in the calls it split: the next round looks
        # at those (the lines they replaced were new, so no longer compared with the source).
        regions = [
            ([new], _source_lines(text_lines, (positions[call].start.line, positions[call].end.line)))
            for call, new in splitter.split.items()
        ]
    return module


def _source_lines(lines: list[str], replaced: tuple[int, int] | None) -> list[str]:
    return [] if replaced is None else lines[replaced[0] - 1 : replaced[1]]


def _lines_made_too_long(
    regions: Sequence[tuple[Sequence[cst.CSTNode], list[str]]],
    positions: Mapping[cst.CSTNode, CodeRange],
    text_lines: list[str],
    line_length: int,
    judge_replaced: bool,
) -> set[int]:
    """The 1-based lines of the module longer than ``line_length`` that its written
    regions changed, where (``judge_replaced``) the lines they replaced all fitted: a line
    the user wrote too long is theirs. Lines a region keeps as they were (its first and
    last ones, around what a fix changed inside a statement) are not its changes."""
    found: set[int] = set()
    for nodes, old in regions:
        where = [positions[node] for node in nodes if node in positions]
        if not where:
            continue
        first, last = min(r.start.line for r in where), max(r.end.line for r in where)
        new = text_lines[first - 1 : last]
        same_start = 0
        while same_start < min(len(old), len(new)) and old[same_start] == new[same_start]:
            same_start += 1
        same_end = 0
        while same_end < min(len(old), len(new)) - same_start and old[-1 - same_end] == new[-1 - same_end]:
            same_end += 1
        if judge_replaced and any(len(line) > line_length for line in old[same_start : len(old) - same_end]):
            continue
        found.update(first + i for i in range(same_start, len(new) - same_end) if len(new[i]) > line_length)
    return found


def _calls_to_split(
    positions: Mapping[cst.CSTNode, CodeRange], text_lines: list[str], lines: set[int]
) -> dict[cst.Call, str]:
    """For each long line, the call to split and the indentation of the line it starts
    on, relative to its statement's: the outermost call that lies on the line, else a
    call whose arguments all lie on it (written on a line of their own)."""
    statement_starts = sorted(
        where.start.line
        for node, where in positions.items()
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
    )
    chosen: dict[int, tuple[tuple[int, int], cst.Call]] = {}
    for node, where in positions.items():
        if not isinstance(node, cst.Call) or not node.args or _has_bare_generator(node):
            continue
        start, end = where.start.line, where.end.line
        if start == end and start in lines:
            line, rank = start, (1, where.end.column - where.start.column)
        else:
            first, last = positions[node.args[0]], positions[node.args[-1]]
            if not (start < first.start.line == last.end.line and first.start.line in lines):
                continue
            line, rank = first.start.line, (0, 0)
        if line not in chosen or rank > chosen[line][0]:
            chosen[line] = (rank, node)
    found: dict[cst.Call, str] = {}
    for _rank, call in chosen.values():
        call_line = positions[call].start.line
        below = bisect_right(statement_starts, call_line)
        statement = statement_starts[below - 1] if below else call_line
        indent, own = _indent(text_lines[call_line - 1]), _indent(text_lines[statement - 1])
        found[call] = indent[len(own) :] if indent.startswith(own) else ""
    return found


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _has_bare_generator(call: cst.Call) -> bool:
    """``f(x for x in y)``: a trailing comma after it would not parse."""
    return len(call.args) == 1 and isinstance(call.args[0].value, cst.GeneratorExp) and not call.args[0].value.lpar


class _Splitter(cst.CSTTransformer):
    def __init__(self, calls: dict[cst.Call, str], unit: str, positions: Mapping[cst.CSTNode, CodeRange]):
        super().__init__()
        self.calls = calls
        self.unit = unit
        self.positions = positions
        #: Each call split, and what it became.
        self.split: dict[cst.Call, cst.Call] = {}
        # The lines of the calls, sorted by first line, and the furthest last line of each
        # prefix: the rewrite descends only into nodes that share a line with a call.
        spans = sorted((positions[call].start.line, positions[call].end.line) for call in calls)
        self.firsts = [first for first, _ in spans]
        self.reach = list(itertools.accumulate((last for _, last in spans), max))

    def on_visit(self, node: cst.CSTNode) -> bool:
        where = self.positions.get(node)
        if where is None:
            return True
        before = bisect_right(self.firsts, where.end.line)
        return before > 0 and self.reach[before - 1] >= where.start.line

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        relative = self.calls.get(original_node)
        if relative is None:
            return updated_node
        self.split[original_node] = split_call(updated_node, relative, self.unit)
        return self.split[original_node]


def split_call(call: cst.Call, relative: str, unit: str) -> cst.Call:
    """``call`` with one argument a line at ``relative`` + ``unit`` (past the indentation
    of its statement), a trailing comma, and ``)`` at ``relative``."""

    def line_break(indent: str) -> cst.ParenthesizedWhitespace:
        return cst.ParenthesizedWhitespace(
            first_line=cst.TrailingWhitespace(), indent=True, last_line=cst.SimpleWhitespace(indent)
        )

    args = []
    for position, arg in enumerate(call.args):
        after = relative if position == len(call.args) - 1 else relative + unit
        comma = cst.Comma(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=line_break(after))
        args.append(arg.with_changes(comma=comma, whitespace_after_arg=cst.SimpleWhitespace("")))
    return call.with_changes(whitespace_before_args=line_break(relative + unit), args=args)
