"""Text from the working tree made safe for each output: file names and quoted source
can hold control characters, escape sequences, bidi overrides and (on POSIX) bytes that
are not UTF-8, which Python keeps as lone surrogates (``os.fsdecode``).

- a terminal gets them escaped (``\\x1b``, ``\\u202e``, a non-UTF-8 byte as ``\\xff``),
  never an escape sequence it would act on;
- JSON gets U+FFFD for a non-UTF-8 byte, as ruff does (a lone surrogate is not UTF-8);
- XML 1.0 cannot hold most C0 controls at all, even as character references: they are
  escaped as text;
- a URI reference gets the file name's bytes percent-encoded.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote

# C0 and C1 controls and DEL, bidi embeddings/overrides/isolates (they reorder what a
# terminal shows), line and paragraph separators, lone surrogates.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")
_UNPRINTABLE_KEEP_TAB = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]"
)
# What a diff cannot show raw: C0 and C1 controls and DEL but tab and form feed, bidi
# controls (they reorder what a terminal draws: the shown change is not the one made),
# line and paragraph separators, and a carriage return but the one of a CRLF line end (a
# lone one returns the cursor: the next line is drawn over the change). Such a line no
# longer applies as a patch; every other line does.
_UNSAFE_IN_DIFF = re.compile("[\x00-\x08\x0a\x0b\x0d-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# What XML 1.0 does not allow (https://www.w3.org/TR/xml/#charsets), DEL and C1 besides,
# which it allows but a reader of the report should see escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str, keep_tabs: bool = False) -> str:
    """``text`` with what a terminal would act on or hide shown as an escape."""
    pattern = _UNPRINTABLE_KEEP_TAB if keep_tabs else _UNPRINTABLE
    return pattern.sub(_escape, text) if pattern.search(text) else text


def diff_line(line: str) -> str:
    """One line of a unified diff with what a terminal would act on or reorder escaped
    (``\\x1b``, ``\\u202e``, a lone ``\\r``), ending in its newline (``\\n`` or
    ``\\r\\n``, else ``\\n`` added after the escaped lone ``\\r`` that ended it)."""
    end = "\r\n" if line.endswith("\r\n") else "\n" if line.endswith("\n") else ""
    body = line[: len(line) - len(end)]
    if not _UNSAFE_IN_DIFF.search(body):
        return line
    if not end and body.endswith(("\r", "\u2028", "\u2029", "\x0b", "\x1c", "\x1d", "\x1e", "\x85")):
        end = "\n"  # Python's line ends that are not newlines: shown, then a real one
    return _UNSAFE_IN_DIFF.sub(_escape, body) + end


def json_text(text: str) -> str:
    """``text`` valid as UTF-8: each lone surrogate (a byte that was not UTF-8) U+FFFD."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def xml_text(text: str) -> str:
    """``text`` with what XML 1.0 cannot hold escaped (before ``&<>`` escaping)."""
    return _NOT_XML.sub(_escape, text) if _NOT_XML.search(text) else text


def uri_reference(path: str) -> str:
    """A relative path as a URI reference: its bytes percent-encoded, so that ``#``, ``?``,
    spaces and a colon before the first slash (``javascript:x.py``, which would parse as
    a scheme) stay part of the path."""
    return quote(os.fsencode(path.replace(os.sep, "/")), safe="/")
