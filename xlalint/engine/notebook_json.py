"""A notebook's JSON text: where each code cell's ``source`` is in it, and rewriting
only those sources.

``json`` gives no positions, so the text is scanned: the ``cells`` list and each cell's
``source`` are walked, everything else (outputs, metadata) is skipped with the C
decoder and never re-encoded. A fix replaces the ``source`` values of the cells it
changes and leaves every other byte as it was: numbers such as ``1e400`` or ``1E5``,
escapes such as ``\\/`` or ``\\u00e9``, duplicate keys, key order, indentation, line
endings. A notebook whose sources cannot be located without ambiguity (two ``cells``
lists, a cell with two ``source`` keys: which one Jupyter reads depends on its JSON
parser) is refused with :class:`NotebookError`.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from json.decoder import scanstring

from xlalint.model import split_lines


class NotebookError(Exception):
    """A notebook that cannot be checked or written back, said in one line."""


@dataclass(frozen=True)
class SourceString:
    """One JSON string of a cell's ``source`` as it stands in the notebook file."""

    start: int  # offset of its first character in the cell's source
    length: int  # its length, decoded
    line: int  # 1-based line of the file
    column: int  # 0-based column of the character after the opening quote
    raw: str  # the JSON text between the quotes, escapes and all


@dataclass(frozen=True)
class SourceValue:
    """Where a cell's whole ``source`` value is in the text, to replace it."""

    start: int  # offset of its `"` or `[`
    end: int  # offset just after it
    is_list: bool
    strings: tuple[tuple[int, int], ...]  # (offset of the opening quote, just after the closing one)


def source_strings(text: str) -> dict[int, tuple[SourceString, ...]]:
    """Where the strings of each cell's ``source`` are in a notebook's JSON text, by
    1-based cell number; {} if the text is not laid out as a notebook."""
    try:
        return _SourceScanner(text).notebook().cells
    except (ValueError, IndexError):
        return {}


def replace_sources(text: str, sources: dict[int, str]) -> str:
    """``text`` with the ``source`` of each cell in ``sources`` (1-based cell number ->
    its new source) replaced, written as the old one was (one string or a list of
    lines, the same indentation; unchanged lines keep their escapes), and every other
    character as it was. Raises NotebookError, saying why, when that cannot be done
    exactly."""
    left = "notebook left unchanged"
    try:
        scan = _SourceScanner(text).notebook()
    except (ValueError, IndexError):
        raise NotebookError(f"the cells' sources cannot be located in the notebook's JSON; {left}") from None
    if scan.repeated_cells:
        raise NotebookError(
            f"the notebook has more than one `cells` key (which one is read depends on the reader); {left}"
        )
    parts, last = [], 0
    for number in sorted(sources):
        if number in scan.repeated_sources:
            raise NotebookError(
                f"cell {number} has more than one `source` key (which one is read depends on the reader); {left}"
            )
        value = scan.values.get(number)
        if value is None:
            raise NotebookError(f"the source of cell {number} cannot be located in the notebook's JSON; {left}")
        parts += [text[last : value.start], _encode(text, value, scan.cells[number], sources[number])]
        last = value.end
    new = "".join(parts) + text[last:]
    written = _SourceScanner(new).notebook().cells
    for number, source in sources.items():
        if "".join(_decoded(piece.raw) for piece in written.get(number, ())) != source:
            raise NotebookError(f"the new source of cell {number} does not read back as written; {left}")
    return new


def _encode(text: str, value: SourceValue, old: tuple[SourceString, ...], source: str) -> str:
    """The JSON text of a new ``source`` value, laid out as ``value`` was."""
    # A file all in ASCII was written with \u escapes (or has nothing else): keep it ASCII.
    ascii_only = text.isascii()
    if not value.is_list:
        return _string(source, ascii_only)
    lines = split_lines(source, keepends=True)
    if not lines:
        return "[]"
    # An unchanged line keeps its escapes as the user's tool wrote them (`\/`, `\u00e9`).
    known = {_decoded(piece.raw): piece.raw for piece in old}
    items = [f'"{known[line]}"' if line in known else _string(line, ascii_only) for line in lines]
    opening, separator, closing = _list_layout(text, value)
    return "[" + opening + separator.join(items) + closing + "]"


def _list_layout(text: str, value: SourceValue) -> tuple[str, str, str]:
    """The text after ``[``, between two items and before ``]`` of a ``source`` list."""
    strings = value.strings
    if strings:
        opening = text[value.start + 1 : strings[0][0]]
        closing = text[strings[-1][1] : value.end - 1]
        separator = text[strings[0][1] : strings[1][0]] if len(strings) > 1 else "," + opening
        return opening, separator, closing
    # An empty list: one indentation step more than the line of its key.
    line_start = max(text.rfind("\n", 0, value.start) + 1, 0)
    line = text[line_start : value.start]
    lead = line[: len(line) - len(line.lstrip(" \t"))]
    if "\n" not in text:
        return "", ", " if '": ' in text else ",", ""
    newline = "\r\n" if "\r\n" in text else "\n"
    second = text[text.find("\n") + 1 :]
    step = second[: len(second) - len(second.lstrip(" \t"))] or " "
    return newline + lead + step, "," + newline + lead + step, newline + lead


def _string(value: str, ascii_only: bool) -> str:
    encoded = json.dumps(value, ensure_ascii=ascii_only)
    try:
        encoded.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: only its escape can be written
        encoded = json.dumps(value, ensure_ascii=True)
    return encoded


def _decoded(raw: str) -> str:
    return scanstring(f'"{raw}"', 1)[0]


def file_position(strings: tuple[SourceString, ...], offset: int, *, after: bool) -> tuple[int, int]:
    """The file line and 1-based column of the character at ``offset`` of the cell's
    source, or (``after``) of the position just after the character before it, which
    stays on that character's line when the source is a list of lines."""
    if after:
        piece = next((p for p in strings if p.start < offset <= p.start + p.length), strings[-1])
    else:
        piece = next((p for p in strings if p.start <= offset < p.start + p.length), strings[-1])
    index = max(0, min(offset - piece.start, piece.length))
    return piece.line, piece.column + _raw_index(piece.raw, index) + 1


def _raw_index(raw: str, index: int) -> int:
    """Where the ``index``-th character of a JSON string's value starts in its JSON text."""
    if "\\" not in raw:
        return index
    position = 0
    for _ in range(index):
        if raw[position] != "\\":
            position += 1
        elif raw[position + 1] != "u":
            position += 2
        elif 0xD800 <= int(raw[position + 2 : position + 6], 16) < 0xDC00 and _LOW_SURROGATE.match(raw, position + 6):
            position += 12  # a surrogate pair is one character
        else:
            position += 6
    return position


_LOW_SURROGATE = re.compile(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class _SourceScanner:
    def __init__(self, text: str):
        self.text = text
        self.decoder = json.JSONDecoder()
        # JSON strings escape their line breaks: every break in the text is layout.
        self.line_starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text)]
        self.cells: dict[int, tuple[SourceString, ...]] = {}
        self.values: dict[int, SourceValue] = {}
        self.repeated_cells = False
        self.repeated_sources: set[int] = set()
        self._seen_cells = False

    def notebook(self) -> _SourceScanner:
        self.object(0, self.top_member)
        return self

    def top_member(self, key: str, i: int) -> int:
        if key != "cells":
            return self.skip(i)
        self.repeated_cells, self._seen_cells = self._seen_cells, True
        return self.array(i, self.cell)

    def cell(self, index: int, i: int) -> int:
        if self.text[i] != "{":
            return self.skip(i)
        number = index + 1
        self.cells.pop(number, None)
        self.values.pop(number, None)
        seen = False

        def member(key: str, j: int) -> int:
            nonlocal seen
            if key != "source":
                return self.skip(j)
            if seen:
                self.repeated_sources.add(number)
            seen = True
            return self.source(number, j)

        return self.object(i, member)

    def source(self, number: int, i: int) -> int:
        strings: list[SourceString] = []
        spans: list[tuple[int, int]] = []
        start = 0

        def string(_: int, j: int) -> int:
            nonlocal start
            if self.text[j] != '"':
                raise ValueError("a source line is not a string")
            value, end = scanstring(self.text, j + 1)
            line = bisect.bisect_right(self.line_starts, j)
            column = j + 1 - self.line_starts[line - 1]
            strings.append(SourceString(start, len(value), line, column, self.text[j + 1 : end - 1]))
            spans.append((j, end))
            start += len(value)
            return end

        first = self.text[i]
        end = string(0, i) if first == '"' else self.array(i, string) if first == "[" else self.skip(i)
        self.cells[number] = tuple(strings)
        if first in '"[':
            self.values[number] = SourceValue(i, end, first == "[", tuple(spans))
        return end

    def space(self, i: int) -> int:
        match = _JSON_SPACE.match(self.text, i)
        assert match is not None  # the pattern matches the empty string
        return match.end()

    def expect(self, i: int, char: str) -> int:
        i = self.space(i)
        if self.text[i] != char:
            raise ValueError(f"expected {char!r} at {i}")
        return i + 1

    def skip(self, i: int) -> int:
        return self.decoder.raw_decode(self.text, self.space(i))[1]

    def object(self, i: int, member) -> int:
        """Read the object at ``i``; ``member(key, start)`` reads each value and returns
        where it ends. Returns where the object ends."""
        i = self.space(self.expect(i, "{"))
        if self.text[i] == "}":
            return i + 1
        while True:
            key, i = scanstring(self.text, self.expect(i, '"'))
            i = self.space(member(key, self.space(self.expect(i, ":"))))
            if self.text[i] == "}":
                return i + 1
            i = self.expect(i, ",")

    def array(self, i: int, item) -> int:
        """Read the array at ``i``; ``item(index, start)`` reads each element."""
        i = self.space(self.expect(i, "["))
        if self.text[i] == "]":
            return i + 1
        index = 0
        while True:
            i = self.space(item(index, self.space(i)))
            if self.text[i] == "]":
                return i + 1
            i, index = self.expect(i, ","), index + 1
