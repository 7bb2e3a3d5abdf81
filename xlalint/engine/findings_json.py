"""Findings as JSON, for the result cache.

The cache lives in the working tree (``.xlalint_cache``), so a pull request can ship
entries: they are untrusted input. They are therefore plain JSON, never pickles, and
reading one rebuilds the dataclasses of :mod:`xlalint.model` field by field
from their type annotations, rejecting anything else: a missing or extra field, a
wrong type, an unknown operation, a line beyond the file, a number out of range.
Whatever is rejected raises :class:`InvalidEntry` (and the caller treats it as a miss).

An entry also says which file it describes (:class:`FileStamp`: path, size, mtime and
content hash), and :func:`check_against` holds its findings to that file: its path,
and lines and columns within its text.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from functools import cache
from typing import Any

from xlalint import model
from xlalint.model import Finding

# 2: an entry names its file (size, mtime, hash); 3: findings carry `after_port`; 4: `fix_withheld`;
# 5: the file stamp says whether the file makes an XLA program (`xla_program`);
# 6: and which imported functions' results its step loops iterate (`iterated`)
FORMAT = 6
# Columns and lines beyond this are not from a real file (the size limit is 8 MiB).
MAX_INT = 2**31 - 1
# Sizes and nanosecond times of a file.
MAX_STAMP = 2**63 - 1


class InvalidEntry(ValueError):
    """Cached data that is not what this version of xlalint writes."""


@dataclasses.dataclass(frozen=True)
class FileStamp:
    """The file an entry describes: its path as checked, and what it held."""

    path: str
    size: int
    mtime_ns: int  # 0: unknown (the file was too fresh to trust its time)
    sha256: str
    # What the file may import from its project (``project.import_specs``: level,
    # dotted name, names), when the check was asked to follow imports; else None.
    imports: tuple[tuple[int, str, tuple[str, ...]], ...] | None = None
    # The file imports torch_xla or its port does (``runner.makes_xla_program``), when
    # the check was asked to follow imports; else None.
    xla_program: bool | None = None
    # The functions of local modules whose results a step loop of the file iterates
    # (``Context.iterated_imports``: level, dotted name), when the check was asked to
    # follow imports; else None.
    iterated: tuple[tuple[int, str], ...] | None = None


def dumps(key: str, stamp: FileStamp, findings: list[Finding]) -> bytes:
    entry = {
        "format": FORMAT,
        "key": key,
        # Its fields as they are (asdict copied every tuple of `imports` on the way).
        "file": {field.name: getattr(stamp, field.name) for field in dataclasses.fields(stamp)},
        "findings": [_encode(f) for f in findings],
    }
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")


def loads(data: bytes, key: str) -> tuple[FileStamp, list[Finding]]:
    """The file stamp and findings in ``data``, checked to be well-formed and to
    belong to ``key``; :func:`check_against` then holds them to the file itself."""
    try:
        entry = json.loads(data.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise InvalidEntry(f"not JSON: {type(exc).__name__}") from None
    if not isinstance(entry, dict) or set(entry) != {"format", "key", "file", "findings"}:
        raise InvalidEntry("not a cache entry")
    if entry["format"] != FORMAT or entry["key"] != key:
        raise InvalidEntry("another format or another file's entry")
    stamp = entry["file"]
    if (
        not isinstance(stamp, dict)
        or set(stamp) - {"imports", "xla_program", "iterated"} != {"path", "size", "mtime_ns", "sha256"}
        or not isinstance(stamp.get("xla_program"), (bool, type(None)))
        or not isinstance(stamp["path"], str)
        or not all(_stamp_int(stamp[name]) for name in ("size", "mtime_ns"))
        or not (isinstance(stamp["sha256"], str) and len(stamp["sha256"]) == 64)
    ):
        raise InvalidEntry("not a file stamp")
    imports = stamp.get("imports")
    if imports is not None:
        if not isinstance(imports, list) or not all(_import_spec(spec) for spec in imports):
            raise InvalidEntry("not a list of imports")
        stamp["imports"] = tuple((level, dotted, tuple(names)) for level, dotted, names in imports)
    iterated = stamp.get("iterated")
    if iterated is not None:
        if not isinstance(iterated, list) or not all(_function_spec(spec) for spec in iterated):
            raise InvalidEntry("not a list of functions")
        stamp["iterated"] = tuple((level, dotted) for level, dotted in iterated)
    findings = _decode(entry["findings"], tuple[Finding, ...], "findings")
    return FileStamp(**stamp), list(findings)


def _import_spec(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 3
        and isinstance(value[0], int)
        and not isinstance(value[0], bool)
        and 0 <= value[0] <= MAX_INT
        and isinstance(value[1], str)
        and isinstance(value[2], list)
        and all(isinstance(name, str) for name in value[2])
    )


def _function_spec(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], int)
        and not isinstance(value[0], bool)
        and 0 <= value[0] <= MAX_INT
        and isinstance(value[1], str)
    )


def _stamp_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_STAMP


def check_against(findings: list[Finding], path: str, lines: list[str]) -> None:
    """Raise :class:`InvalidEntry` unless every finding is about ``path`` and every
    position in it (fixes included) is within ``lines``, the file's text."""
    for finding in findings:
        if finding.path != path:
            raise InvalidEntry(f"a finding about another file: {finding.path!r}")
        for row in (finding.noqa_row, *finding.noqa_lines):
            if row is not None and not 1 <= row <= len(lines) + 1:
                raise InvalidEntry(f"a noqa line beyond the file: {row}")
        for span in _spans(finding):
            if not (_within(span.line, span.col, lines) and _within(span.end_line, span.end_col, lines)):
                raise InvalidEntry(f"a span beyond the file: {span}")
            if (span.end_line, span.end_col) < (span.line, span.col):
                raise InvalidEntry(f"a span that ends before it starts: {span}")


def _within(line: int, col: int, lines: list[str]) -> bool:
    # A position may sit at the end of a line, or at the start of the line after the last.
    if 1 <= line <= len(lines):
        return col <= len(lines[line - 1])
    return line == len(lines) + 1 and col == 0


def _encode(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"type": type(value).__name__, **fields}
    if isinstance(value, tuple | list):
        return [_encode(item) for item in value]
    return value


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, vars(model))


def _decode(value: Any, expected: Any, where: str) -> Any:
    origin = typing.get_origin(expected)
    if expected is type(None):
        if value is not None:
            raise InvalidEntry(f"{where}: expected null")
        return None
    if expected is bool:
        if not isinstance(value, bool):
            raise InvalidEntry(f"{where}: expected a boolean")
        return value
    if expected is int:
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_INT:
            raise InvalidEntry(f"{where}: expected a line or column number")
        return value
    if expected is str:
        if not isinstance(value, str):
            raise InvalidEntry(f"{where}: expected a string")
        return value
    if origin is typing.Literal:
        if not isinstance(value, str) or value not in typing.get_args(expected):
            raise InvalidEntry(f"{where}: expected one of {typing.get_args(expected)}")
        return value
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(expected)
        if value is None and type(None) in options:
            return None
        others = [option for option in options if option is not type(None)]
        if len(others) == 1:
            return _decode(value, others[0], where)
        classes = {cls.__name__: cls for cls in others if dataclasses.is_dataclass(cls)}
        if len(classes) != len(others) or not isinstance(value, dict) or value.get("type") not in classes:
            raise InvalidEntry(f"{where}: expected one of {sorted(classes)}")
        return _decode(value, classes[value["type"]], where)
    if origin is tuple:
        args = typing.get_args(expected)
        if not isinstance(value, list):
            raise InvalidEntry(f"{where}: expected a list")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(item, args[0], f"{where}[{i}]") for i, item in enumerate(value))
        if len(value) != len(args):
            raise InvalidEntry(f"{where}: expected {len(args)} items")
        return tuple(_decode(item, arg, f"{where}[{i}]") for i, (item, arg) in enumerate(zip(value, args)))
    if isinstance(expected, type) and dataclasses.is_dataclass(expected):
        hints = _hints(expected)
        names = [f.name for f in dataclasses.fields(expected)]
        if not isinstance(value, dict) or value.get("type") != expected.__name__ or set(value) != {"type", *names}:
            raise InvalidEntry(f"{where}: expected a {expected.__name__} with fields {names}")
        kwargs = {name: _decode(value[name], hints[name], f"{where}.{name}") for name in names}
        try:
            return expected(**kwargs)
        except (TypeError, ValueError) as exc:
            raise InvalidEntry(f"{where}: {exc}") from None
    raise InvalidEntry(f"{where}: cannot read a {expected!r}")  # a model type this codec does not know


def _spans(value: Any):
    if isinstance(value, model.Span):
        yield value
    elif isinstance(value, tuple):
        for item in value:
            yield from _spans(item)
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            yield from _spans(getattr(value, f.name))
