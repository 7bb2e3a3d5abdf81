"""Suppression comments: ``# noqa``, ``# noqa: XLA102``, ``# xlalint: disable-file``;
and ``check --add-noqa``, which writes them.

Comments are found with ``tokenize``, so a ``# noqa`` inside a string never counts,
and only when the text mentions "noqa" at all. Codes of other tools in the same
comment (``# noqa: E501, XLA104``) are read past and left alone; a comment that
names only other tools' codes suppresses nothing of ours.

A line that cannot end with a comment (it ends inside a multi-line string, or with a
backslash) is suppressed by a comment at the end of the line where that string or
continuation ends, after the closing quotes, as ruff does.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import tokenize
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from xlalint.model import Finding, line_count, split_lines

# The code list runs over everything shaped like a code, letters then a digit: a code
# (`XLA104`) or a malformed one (`XLA1O4`, warned about and read past, as ruff does), so
# that the codes after a malformed one still count and `--add-noqa` appends after them.
NOQA = re.compile(
    r"#\s*noqa(?P<sep>\s*:\s*(?P<codes>[A-Za-z]+[0-9][A-Za-z0-9]*(?:[\s,]+[A-Za-z]+[0-9][A-Za-z0-9]*)*))?",
    re.IGNORECASE,
)
_ITEM = re.compile(r"[A-Za-z0-9]+")
_CODE = re.compile(r"[A-Za-z]+[0-9]+")
# The prefix of xlalint's own codes: the others in a comment (`E501`, `F401`) belong to
# other tools.
OWN_CODE_PREFIX = "XLA"
DISABLE_FILE = re.compile(r"#\s*xlalint\s*:\s*disable-file\b")
ALL = frozenset({"*"})


def file_disabled(source: str) -> bool:
    """``# xlalint: disable-file`` in the first ten lines, or ``# xlalint: noqa`` (no
    codes) on a line of its own anywhere, as ruff's ``# ruff: noqa``."""
    if "xlalint" not in source:
        return False  # most files: no need to look further
    if file_exemptions(source) is ALL:
        return True
    if not DISABLE_FILE.search(source):
        return False
    head = split_lines(source)[:10]
    return any(DISABLE_FILE.search(line) for line in head)


# A file-level directive: a comment line of its own, `# xlalint: ...`.
FILE_DIRECTIVE = re.compile(r"^[ \t]*#\s*xlalint\s*:(?P<rest>[^\r\n]*)", re.M)
FILE_NOQA = re.compile(r"\s*noqa\b(?:\s*:\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?\s*(?:#.*)?$")
KNOWN_DIRECTIVE = re.compile(r"\s*(disable-file\b|noqa\b)")


def file_exemptions(source: str) -> frozenset[str]:
    """The codes ``# xlalint: noqa: XLA104, XLA201`` lines exempt the whole file from
    (``ALL`` for a bare ``# xlalint: noqa``), as ruff's ``# ruff: noqa[: codes]``."""
    if "xlalint" not in source:
        return frozenset()
    codes: set[str] = set()
    for match in FILE_DIRECTIVE.finditer(source):
        noqa = FILE_NOQA.match(match.group("rest"))
        if noqa is None:
            continue
        if noqa.group("codes") is None:
            return ALL
        codes.update(code.upper() for code in re.split(r"[\s,]+", noqa.group("codes")) if code)
    return frozenset(codes)


def unknown_file_directives(source: str) -> list[tuple[int, str]]:
    """``# xlalint: ...`` comment lines that are neither ``disable-file`` nor a
    well-formed ``noqa[: codes]``: (line, the comment), to warn about (they suppress
    nothing, as ruff warns about a ``# ruff: noqa`` it cannot read)."""
    if "xlalint" not in source:
        return []
    found = []
    for match in FILE_DIRECTIVE.finditer(source):
        rest = match.group("rest")
        known = KNOWN_DIRECTIVE.match(rest)
        if known and (known.group(1) == "disable-file" or FILE_NOQA.match(rest)):
            continue
        found.append((source.count("\n", 0, match.start()) + 1, match.group(0).strip()))
    return found


def _continued_lines(source: str, tokens: list[tokenize.TokenInfo]) -> set[int]:
    """The lines that go on to the next line, so cannot end with a comment: inside a
    string that goes on to the next line, or continued with a backslash."""
    continued: set[int] = set()
    for token in tokens:
        if token.type in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            continue
        if token.end[0] > token.start[0]:  # a multi-line string (or f-string part)
            continued.update(range(token.start[0], token.end[0]))
    for number, line in enumerate(split_lines(source), 1):
        if line.endswith("\\"):
            continued.add(number)
    return continued


@dataclass(frozen=True)
class CodeItem:
    """One entry of a ``# noqa:`` list: its text as written, where it is in the comment
    (``start``/``end``, columns in the comment's text), and whether it is a well-formed code."""

    text: str
    start: int
    end: int
    valid: bool

    @property
    def code(self) -> str:
        return self.text.upper()


@dataclass(frozen=True)
class Directive:
    """A ``# noqa`` comment: on ``line`` from column ``col`` (``comment`` is its whole
    text), standing for ``lines`` (its line and the lines that continue onto it);
    ``items`` is its code list (empty for a bare ``# noqa``); ``start``/``end``: where
    the directive itself (``# noqa: ...``, not the text around it) is in ``comment``."""

    line: int
    col: int
    comment: str
    start: int
    end: int
    items: tuple[CodeItem, ...]
    lines: tuple[int, ...]

    @functools.cached_property
    def codes(self) -> frozenset[str]:
        """The codes it suppresses: ``{"*"}`` when bare."""
        if not self.items:
            return ALL
        return frozenset(item.code for item in self.items if item.valid)


def parse_directive(comment: str) -> tuple[int, int, tuple[CodeItem, ...]] | None:
    """Where the ``# noqa`` directive is in a comment's text and its code list, or None."""
    match = NOQA.search(comment)
    if not match:
        return None
    if not match.group("codes"):
        return match.start(), match.end(), ()
    offset = match.start("codes")
    items = tuple(
        CodeItem(m.group(), offset + m.start(), offset + m.end(), bool(_CODE.fullmatch(m.group())))
        for m in _ITEM.finditer(match.group("codes"))
    )
    return match.start(), match.end(), items


def directives(source: str) -> list[Directive]:
    """Every ``# noqa`` comment of ``source``, in order."""
    if "noqa" not in source.lower():
        return []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    found: list[Directive] = []
    continued: set[int] | None = None
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        parsed = parse_directive(token.string)
        if parsed is None:
            continue
        if continued is None:
            continued = _continued_lines(source, tokens)
        # The comment also stands for the lines before it that continue onto its line.
        lines = [token.start[0]]
        while lines[-1] - 1 in continued:
            lines.append(lines[-1] - 1)
        start, end, items = parsed
        found.append(Directive(token.start[0], token.start[1], token.string, start, end, items, tuple(lines)))
    return found


def noqa_map(source: str, found: list[Directive] | None = None) -> dict[int, frozenset[str]]:
    """Line -> suppressed codes (``{"*"}`` for a bare ``# noqa``)."""
    result: dict[int, frozenset[str]] = {}
    for directive in directives(source) if found is None else found:
        for line in directive.lines:
            result[line] = result.get(line, frozenset()) | directive.codes
    return result


class Suppressions:
    """The ``# noqa`` directives of a file, and which of them hid a finding: asked once
    per finding, it records the directive and code that suppressed it (``used``), for
    XLA100 (unused-noqa) to read after every other rule ran."""

    def __init__(self, source: str):
        self.directives = directives(source)
        self.by_line: dict[int, list[int]] = {}
        for index, directive in enumerate(self.directives):
            for line in directive.lines:
                self.by_line.setdefault(line, []).append(index)
        #: (directive index, code) of each suppression that hid a finding.
        self.used: set[tuple[int, str]] = set()

    def suppresses(self, finding: Finding) -> bool:
        for line in finding.noqa_lines:
            for index in self.by_line.get(line, ()):
                directive = self.directives[index]
                if not directive.items:
                    return True
                if finding.code in directive.codes:
                    self.used.add((index, finding.code))
                    return True
        return False


def without_codes(directive: Directive, codes: set[str], line_text: str) -> tuple[int, int, str]:
    """How to drop ``codes`` from ``directive`` on its line ``line_text``: the columns to
    replace and the text to put there. The other codes keep their text and the
    separators after them; when no code is left the directive goes, with the blanks
    before it when nothing else is in the comment; the comment text after it stays."""
    text = directive.comment
    items = directive.items
    kept = [number for number, item in enumerate(items) if item.code not in codes or not item.valid]
    if kept:
        pieces = [text[: items[0].start]]
        for position, number in enumerate(kept):
            if position:
                previous = kept[position - 1]
                # The separator that followed the previous kept code.
                pieces.append(text[items[previous].end : items[previous + 1].start])
            pieces.append(items[number].text)
        pieces.append(text[items[-1].end :])
        return directive.col, directive.col + len(text), "".join(pieces)
    before, after = text[: directive.start].rstrip(), text[directive.end :].strip()
    if after and not after.startswith("#"):
        after = "# " + after
    new = "  ".join(part for part in (before, after) if part)
    start = directive.col
    if not new:  # the whole comment goes, with the blanks before it
        start = len(line_text[: directive.col].rstrip())
    return start, directive.col + len(text), new


def malformed_codes(source: str) -> list[tuple[int, str]]:
    """(line, code) of each malformed code in a ``# noqa:`` list (``XLA1O4``)."""
    if not any(not _CODE.fullmatch(item) for item in _listed_codes(source)):
        return []  # most files: no need to tokenize them
    return [(d.line, item.text) for d in directives(source) for item in d.items if not item.valid]


def may_name_codes(source: str, prefix: str) -> bool:
    """Whether a ``# noqa:`` list in ``source`` may name a code starting with ``prefix``
    (``XLA``): read off the text, strings included, so a cheap test before the tokenizer
    that tells comments from strings. Many files carry other tools' ``# noqa: F401``."""
    prefix = prefix.upper()
    return any(item.upper().startswith(prefix) for item in _listed_codes(source))


def _listed_codes(source: str) -> Iterator[str]:
    """Each item of each ``# noqa:`` code list in the text, comments or not."""
    if "noqa" not in source.lower():
        return
    for match in NOQA.finditer(source):
        if match.group("codes"):
            yield from _ITEM.findall(match.group("codes"))


def is_suppressed(code: str, lines: tuple[int, ...], suppressions: dict[int, frozenset[str]]) -> bool:
    for line in lines:
        codes = suppressions.get(line)
        if codes and ("*" in codes or code in codes):
            return True
    return False


# --- --add-noqa ------------------------------------------------------------------------------


def commentable_lines(source: str) -> set[int] | None:
    """The lines that can end with a comment. None if the source does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    continued = _continued_lines(source, tokens)
    return {n for n in range(1, len(split_lines(source)) + 1) if n not in continued}


def add_noqa(source: str, findings: list[Finding]) -> tuple[str, int]:
    """``source`` with ``# noqa: CODE`` on a line where each finding's suppression is
    honoured (merged into a ``# noqa:`` list that is there), and how many lines changed.

    A finding is suppressed on its first line or the last line of its statement
    (``Finding.noqa_lines``); the first of those that can hold a comment is used. When
    none can (a statement that ends on a line where a multi-line string starts), the
    comment goes where that string ends, after its closing quotes, and
    :func:`noqa_map` honours it there. Syntax errors (XLA000) cannot be suppressed and
    are left as they are."""
    candidates = commentable_lines(source)
    if candidates is None:
        return source, 0
    last_line = line_count(source)
    wanted: dict[int, set[str]] = {}
    for finding in findings:
        if finding.code == "XLA000" or not finding.noqa_lines:
            continue
        order = sorted(finding.noqa_lines, key=lambda n: (n != finding.noqa_row, n))
        line = next((n for n in order if n in candidates), None)
        if line is None:
            line = order[0]
            while line not in candidates and line < last_line:
                line += 1
        if line in candidates:
            wanted.setdefault(line, set()).add(finding.code)
    if not wanted:
        return source, 0
    comments = _comments(source)
    lines = split_lines(source, keepends=True)
    changed = 0
    for number, codes in wanted.items():
        text = lines[number - 1]
        body = text.rstrip("\r\n")
        newline = text[len(body) :]
        comment = comments.get(number)
        match = NOQA.search(body, comment[0]) if comment else None
        if match and not match.group("codes"):
            continue  # a bare noqa comment already suppresses everything
        if match:
            present = [c for c in re.split(r"[\s,]+", match.group("codes")) if c]
            new = sorted(codes - {c.upper() for c in present})
            if not new:
                continue
            body = body[: match.end("codes")] + ", " + ", ".join(new) + body[match.end("codes") :]
        else:
            body = body.rstrip() + "  # noqa: " + ", ".join(sorted(codes))
        lines[number - 1] = body + newline
        changed += 1
    return "".join(lines), changed


def add_noqa_until_clean(source: str, lint: Callable[[str], list[Finding]]) -> tuple[str, list[Finding], int]:
    """What ``--add-noqa`` writes: ``source`` with a ``# noqa`` for each finding that is
    still there once the others are suppressed, so that ``check`` then passes and a
    second run changes nothing (as ruff promises); the findings suppressed; how many
    lines changed.

    A finding that follows from the port (``after_port``) exists only because XLA104's
    fixes would make the file an XLA script: once XLA104 is suppressed there is no port
    and no such finding, so a ``# noqa`` for it would be unused (XLA100). Those are
    left out of the first pass, and the file is checked again until nothing is left
    (bounded: a comment never adds a finding that is not suppressed the next pass)."""
    findings = lint(source)
    new, _ = add_noqa(source, [f for f in findings if not f.after_port])
    for _ in range(3):
        remaining = [f for f in lint(new) if f.code != "XLA000"]
        if not remaining:
            break
        new, added = add_noqa(new, remaining)
        if not added:
            break
    before, after = split_lines(source), split_lines(new)
    return new, findings, sum(a != b for a, b in zip(before, after, strict=False))


def _comments(source: str) -> dict[int, tuple[int, int]]:
    """Line -> (start, end) column of its comment."""
    result: dict[int, tuple[int, int]] = {}
    with contextlib.suppress(tokenize.TokenError, SyntaxError, IndentationError):
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                result[token.start[0]] = (token.start[1], token.end[1])
    return result
