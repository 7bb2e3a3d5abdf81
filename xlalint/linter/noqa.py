"""Suppression comments: ``# noqa``, ``# noqa: XLA102``, ``# xlalint: disable-file``.

Comments are found with ``tokenize``, so a ``# noqa`` inside a string never counts,
and only when the text mentions "noqa" at all. Codes of other tools in the same
comment (``# noqa: E501, XLA104``) are read past and left alone; a comment that
names only other tools' codes suppresses nothing of ours.
"""

from __future__ import annotations

import io
import re
import tokenize

from xlalint.linter.model import split_lines

NOQA = re.compile(
    r"#\s*noqa(?P<sep>\s*:\s*(?P<codes>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*))?",
    re.IGNORECASE,
)
DISABLE_FILE = re.compile(r"#\s*xlalint\s*:\s*disable-file\b")
ALL = frozenset({"*"})


def file_disabled(source: str) -> bool:
    head = split_lines(source)[:10]
    return any(DISABLE_FILE.search(line) for line in head)


def noqa_map(source: str) -> dict[int, frozenset[str]]:
    """Line -> suppressed codes (``{"*"}`` for a bare ``# noqa``)."""
    if "noqa" not in source.lower():
        return {}
    result: dict[int, frozenset[str]] = {}
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return {}
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        match = NOQA.search(token.string)
        if not match:
            continue
        if match.group("codes"):
            codes = frozenset(c.upper() for c in re.split(r"[\s,]+", match.group("codes")) if c)
        else:
            codes = ALL
        line = token.start[0]
        result[line] = result.get(line, frozenset()) | codes
    return result


def is_suppressed(code: str, lines: tuple[int, ...], suppressions: dict[int, frozenset[str]]) -> bool:
    for line in lines:
        codes = suppressions.get(line)
        if codes and ("*" in codes or code in codes):
            return True
    return False
