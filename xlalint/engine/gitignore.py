"""``.gitignore`` patterns matched in time linear in the path.

A glob translated to a regular expression backtracks: ``*a*a*a*a*a*a*a*a*a*ab`` against
a name of 40 ``a`` took 11 s (73 s under a deep folder), and a pull request could hang
CI with one line. Here a pattern is matched segment by segment: a segment's glob is
split at its ``*`` into pieces of fixed length (literals, ``?``, ``[...]``), each found
leftmost after the one before (that choice never loses a match), and ``**`` folders are
a set of positions carried forward. Each segment is tried once per pattern element.

The meaning is git's (gitignore(5)) as ``pathspec.GitIgnoreSpec`` reads it, which the
tests compare against: the last matching pattern decides, except that a pattern matching
the path itself wins over one matching only a folder it is in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# A pattern's verdict on a path: matched as the path itself, or as a folder above it.
ITSELF, FOLDER = 2, 1


class _Glob:
    """One segment's glob: ``*`` is any run of characters, ``?`` one, ``[...]`` one of
    a class, ``\\x`` the character x."""

    def __init__(self, pieces: list[list[str]], nonempty: bool):
        self.nonempty = nonempty  # a whole-segment ``*``: any name, but not an empty one
        self.lengths = [len(piece) for piece in pieces]
        self.pieces = [re.compile("".join(piece), re.DOTALL) for piece in pieces]

    def matches(self, name: str) -> bool:
        if self.nonempty:
            return bool(name)
        if len(self.pieces) == 1:
            return len(name) == self.lengths[0] and self.pieces[0].match(name) is not None
        first, *middle, last = self.pieces
        if first.match(name) is None:
            return False
        position = self.lengths[0]
        tail_start = len(name) - self.lengths[-1]
        for piece in middle:
            found = piece.search(name, position, tail_start)
            if found is None:
                return False
            position = found.end()
        return tail_start >= position and last.match(name, tail_start) is not None


def _glob(segment: str) -> _Glob | None:
    """The glob of one segment; None for an invalid range (git discards the pattern) or a
    trailing backslash."""
    if segment == "*":
        return _Glob([[]], nonempty=True)
    pieces: list[list[str]] = [[]]
    i, end = 0, len(segment)
    while i < end:
        char = segment[i]
        i += 1
        if char == "\\":
            if i == end:
                return None
            pieces[-1].append(re.escape(segment[i]))
            i += 1
        elif char == "*":
            pieces.append([])
        elif char == "?":
            pieces[-1].append("[^/]")
        elif char == "[":
            j = i
            if j < end and segment[j] in "!^":
                j += 1
            if j < end and segment[j] == "]":
                j += 1
            while j < end and segment[j] != "]":
                j += 1
            if j >= end:
                return None
            body = segment[i:j]
            negated = body[:1] in ("!", "^")
            pieces[-1].append("[" + ("^" if negated else "") + body[negated:].replace("\\", "\\\\") + "]")
            i = j + 1
        else:
            pieces[-1].append(re.escape(char))
    try:
        return _Glob(pieces, nonempty=False)
    except re.error:  # a class such as [z-a]
        return None


@dataclass(frozen=True)
class IgnorePattern:
    include: bool  # True: ignore what matches; False: a ``!`` pattern, keep it
    elements: tuple[_Glob | None, ...]  # a glob per segment; None for ``**``
    is_dir: bool  # the pattern ended with ``/``
    matches_all: bool = False  # ``*``, ``**``: every path, as itself
    slash_only: bool = False  # ``*/``, ``*/**``, ``**/``: every path with a ``/`` in it

    def verdict(self, segments: list[str]) -> tuple[int, int] | None:
        """(ITSELF or FOLDER, depth), or None when the pattern does not match ``segments``
        (a folder's path ends with an empty segment, as ``d/`` splits). For FOLDER, depth
        is how many segments the deepest matching folder has."""
        count = len(segments)
        if self.matches_all:
            return (ITSELF, count) if any(segments) else None
        if self.slash_only:
            if count < 2:
                return None
            return (FOLDER, count - 1) if self.is_dir else (ITSELF, count)
        last = len(self.elements) - 1
        # Where the next element may match: one position per segment at most.
        reach: list[int] = [0]
        for index, element in enumerate(self.elements):
            if element is None:
                if index == 0:
                    reach = list(range(count))
                elif index < last:
                    reach = list(range(reach[0], count))
                else:  # a trailing ``/**``: anything below what matched so far
                    below = [position for position in reach if position < count]
                    if below:
                        return (FOLDER, max(below)) if self.is_dir else (ITSELF, count)
                    return None
                continue
            reach = [position + 1 for position in reach if position < count and element.matches(segments[position])]
            if not reach:
                return None
        # The last glob matched the path's last segment (the path itself), or a folder on the way.
        return (ITSELF, count) if count in reach else (FOLDER, max(reach))


def parse(line: str) -> IgnorePattern | None:
    """The pattern of one ``.gitignore`` line; None for a blank line, a comment, or a
    line git discards."""
    text = line if line.endswith("\\ ") else line.rstrip()
    if not text or text.startswith("#") or text == "/":
        return None
    include = not text.startswith("!")
    if not include:
        text = text[1:]
    segments = text.split("/")
    is_dir = not segments[-1]
    if not segments[0]:
        del segments[0]  # anchored at the .gitignore's folder
    elif (len(segments) == 1 or (len(segments) == 2 and not segments[1])) and segments[0] != "**":
        segments.insert(0, "**")  # a bare name matches at any depth
    if not segments:
        return None
    if not segments[-1]:
        segments[-1] = "**"
    collapsed = [s for i, s in enumerate(segments) if not (s == "**" and i > 0 and segments[i - 1] == "**")]
    if (collapsed == ["**"] and not is_dir) or collapsed == ["**", "*"]:
        return IgnorePattern(include, (), is_dir, matches_all=True)
    if collapsed == ["**"] or collapsed == ["**", "*", "**"]:
        return IgnorePattern(include, (), is_dir, slash_only=True)
    elements = []
    for segment in collapsed:
        if segment == "**":
            elements.append(None)
            continue
        glob = _glob(segment)
        if glob is None:
            return None
        elements.append(glob)
    return IgnorePattern(include, tuple(elements), is_dir)


class IgnoreSpec:
    """The patterns of one folder's ignore files, in order."""

    def __init__(self, patterns: Iterable[IgnorePattern]):
        self.patterns = list(patterns)

    @classmethod
    def from_lines(cls, lines: Iterable[str]) -> IgnoreSpec:
        return cls(pattern for pattern in map(parse, lines) if pattern is not None)

    def check(self, relative: str, floor: int = 0) -> bool | None:
        """True if ``relative`` (a posix path; a folder's ends with ``/``) is ignored,
        False if a ``!`` pattern keeps it, None if no pattern matches. A pattern matching
        only a folder of ``floor`` segments or fewer (the folder named on the command line
        and those above it) does not count: as in ruff, a folder named explicitly is
        walked even where a .gitignore above it ignores it."""
        segments = relative.split("/")
        decided = None
        for pattern in reversed(self.patterns):  # the last pattern that matches decides...
            verdict = pattern.verdict(segments)
            if verdict is None:
                continue
            kind, depth = verdict
            if kind == ITSELF:
                return pattern.include
            if depth > floor and decided is None:
                decided = pattern.include  # ...unless an earlier one matches the path itself
        return decided
